package sim

import (
	"net/url"
	"slices"
	"time"

	"github.com/payhook/payhook/sim/deliver"
	"github.com/payhook/payhook/sim/flavour"
)

// Endpoint is a webhook endpoint. Its secret is never part of it: it is
// shown once, by CreateEndpoint and RotateSecret.
type Endpoint struct {
	ID          string    `json:"id"`
	Object      string    `json:"object"`
	URL         string    `json:"url"`
	Events      []string  `json:"events"`
	APIVersion  string    `json:"api_version"`
	Environment string    `json:"environment"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// EndpointUpdate changes an endpoint; nil fields stay as they are.
type EndpointUpdate struct {
	URL        *string   `json:"url,omitempty"`
	Events     *[]string `json:"events,omitempty"`
	APIVersion *string   `json:"api_version,omitempty"`
}

type endpointState struct {
	Endpoint
	secret    string
	previous  string
	rotatedAt time.Time
	deleted   bool
}

func (p *Provider) checkEvents(events []string) error {
	if len(events) == 0 {
		return invalid(`events is required (["*"] for every type)`)
	}
	for _, t := range events {
		if t != "*" && !slices.Contains(EventTypes, t) {
			return invalid("unknown event type %q", t)
		}
	}
	return nil
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalid("url must be an absolute http(s) URL, got %q", raw)
	}
	return nil
}

// CreateEndpoint creates a webhook endpoint in env and returns it with its
// signing secret, which is never shown again. apiVersion "" means the
// provider's version.
func (p *Provider) CreateEndpoint(env, rawURL string, events []string, apiVersion string) (Endpoint, string, error) {
	return p.createEndpoint(env, rawURL, events, apiVersion, p.cfg.Flavour.NewSecretFrom(p.cfg.Rand))
}

// CreateEndpointWithSecret is CreateEndpoint with a signing secret chosen
// by the caller: the one a receiver under test already has configured.
// Real providers make their own; the simulator lets scenarios adopt one.
func (p *Provider) CreateEndpointWithSecret(env, rawURL string, events []string, apiVersion, secret string) (Endpoint, error) {
	if secret == "" {
		return Endpoint{}, invalid("empty signing secret")
	}
	e, _, err := p.createEndpoint(env, rawURL, events, apiVersion, secret)
	return e, err
}

func (p *Provider) createEndpoint(env, rawURL string, events []string, apiVersion, secret string) (Endpoint, string, error) {
	if err := checkURL(rawURL); err != nil {
		return Endpoint{}, "", err
	}
	if err := p.checkEvents(events); err != nil {
		return Endpoint{}, "", err
	}
	if apiVersion == "" {
		apiVersion = p.cfg.APIVersion
	}
	e, err := read(p, env, func(w *world) (Endpoint, error) {
		now := p.now()
		e := &endpointState{
			Endpoint: Endpoint{
				ID: p.newID("we_"), Object: "webhook_endpoint", URL: rawURL,
				Events: slices.Clone(events), APIVersion: apiVersion, Environment: env,
				CreatedAt: now, UpdatedAt: now,
			},
			secret: secret,
		}
		w.endpoints[e.ID] = e
		w.endpointOrder = append(w.endpointOrder, e.ID)
		return e.public(), nil
	})
	if err != nil {
		return Endpoint{}, "", err
	}
	return e, secret, nil
}

func (e *endpointState) public() Endpoint {
	out := e.Endpoint
	out.Events = slices.Clone(e.Events)
	return out
}

// endpoint returns the world's live endpoint id; p.mu must be held.
func (w *world) endpoint(id string) (*endpointState, error) {
	e, ok := w.endpoints[id]
	if !ok || e.deleted {
		return nil, notFound("webhook endpoint", id)
	}
	return e, nil
}

// onEndpoint runs f on env's live endpoint id with p.mu held.
func onEndpoint[T any](p *Provider, env, id string, f func(e *endpointState) (T, error)) (T, error) {
	return read(p, env, func(w *world) (T, error) {
		e, err := w.endpoint(id)
		if err != nil {
			var zero T
			return zero, err
		}
		return f(e)
	})
}

// GetEndpoint returns an endpoint of env (without its secret).
func (p *Provider) GetEndpoint(env, id string) (Endpoint, error) {
	return onEndpoint(p, env, id, func(e *endpointState) (Endpoint, error) { return e.public(), nil })
}

// Endpoints lists env's endpoints in creation order (without secrets).
func (p *Provider) Endpoints(env string) ([]Endpoint, error) {
	return read(p, env, func(w *world) ([]Endpoint, error) {
		out := []Endpoint{}
		for _, id := range w.endpointOrder {
			if e := w.endpoints[id]; !e.deleted {
				out = append(out, e.public())
			}
		}
		return out, nil
	})
}

// UpdateEndpoint changes an endpoint's URL, events or API version. Every
// delivery created afterwards, retries included, uses the new values.
func (p *Provider) UpdateEndpoint(env, id string, u EndpointUpdate) (Endpoint, error) {
	if u.URL != nil {
		if err := checkURL(*u.URL); err != nil {
			return Endpoint{}, err
		}
	}
	if u.Events != nil {
		if err := p.checkEvents(*u.Events); err != nil {
			return Endpoint{}, err
		}
	}
	if u.APIVersion != nil && *u.APIVersion == "" {
		return Endpoint{}, invalid("api_version must not be empty")
	}
	return onEndpoint(p, env, id, func(e *endpointState) (Endpoint, error) {
		if u.URL != nil {
			e.URL = *u.URL
		}
		if u.Events != nil {
			e.Events = slices.Clone(*u.Events)
		}
		if u.APIVersion != nil {
			e.APIVersion = *u.APIVersion
		}
		e.UpdatedAt = p.now()
		return e.public(), nil
	})
}

// DeleteEndpoint deletes an endpoint: no new event goes to it.
func (p *Provider) DeleteEndpoint(env, id string) error {
	_, err := onEndpoint(p, env, id, func(e *endpointState) (struct{}, error) {
		e.deleted = true
		return struct{}{}, nil
	})
	return err
}

// RotateSecret gives an endpoint a new secret and returns it (the only
// time it is shown). The previous secret keeps signing, next to the new
// one, for Config.Grace.
func (p *Provider) RotateSecret(env, id string) (string, error) {
	return onEndpoint(p, env, id, func(e *endpointState) (string, error) {
		e.previous, e.secret = e.secret, p.cfg.Flavour.NewSecretFrom(p.cfg.Rand)
		e.rotatedAt = p.now()
		e.UpdatedAt = e.rotatedAt
		return e.secret, nil
	})
}

// Target returns the delivery target of an endpoint, as Send receives it.
func (p *Provider) Target(env, id string) (deliver.Target, error) {
	return onEndpoint(p, env, id, func(e *endpointState) (deliver.Target, error) { return p.target(e), nil })
}

// target is the deliver.Target of e; its Secrets reads the clock and the
// endpoint's secrets at call time.
func (p *Provider) target(e *endpointState) deliver.Target {
	return deliver.Target{
		ID:      e.ID,
		URL:     e.URL,
		Flavour: p.cfg.Flavour,
		Secrets: func() []string {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.secrets(e)
		},
	}
}

// secrets returns e's signing secrets now; p.mu must be held.
func (p *Provider) secrets(e *endpointState) []string {
	s := []string{e.secret}
	if e.previous != "" && p.cfg.Grace > 0 && p.now().Before(e.rotatedAt.Add(p.cfg.Grace)) {
		s = append(s, e.previous)
	}
	return s
}

// SendTest creates a webhook_endpoint.test event and sends it to that
// endpoint only.
func (p *Provider) SendTest(env, endpointID string) (flavour.Event, error) {
	return change(p, env, func(t *tx) (flavour.Event, error) {
		e, err := t.w.endpoint(endpointID)
		if err != nil {
			return flavour.Event{}, err
		}
		return copyEvent(t.emit("webhook_endpoint.test", e.ID, map[string]any{"endpoint_id": e.ID}, e.ID)), nil
	})
}

// Deliveries returns an endpoint's delivery log (Sender.Log).
func (p *Provider) Deliveries(env, endpointID string) ([]deliver.Attempt, error) {
	if _, err := p.GetEndpoint(env, endpointID); err != nil {
		return nil, err
	}
	log := p.cfg.Sender.Log(endpointID)
	if log == nil {
		log = []deliver.Attempt{}
	}
	return log, nil
}

// ResendDelivery sends a delivery of one of env's endpoints once more
// (Sender.Resend).
func (p *Provider) ResendDelivery(env, deliveryID string) error {
	eps, err := p.Endpoints(env)
	if err != nil {
		return err
	}
	var to *Endpoint
	for _, e := range eps {
		for _, a := range p.cfg.Sender.Log(e.ID) {
			if a.DeliveryID == deliveryID {
				to = &e
				break
			}
		}
		if to != nil {
			break
		}
	}
	if to == nil {
		return notFound("delivery", deliveryID)
	}
	target, err := p.Target(env, to.ID)
	if err != nil {
		return err
	}
	if err := p.cfg.Sender.Resend(deliveryID, target); err != nil {
		return conflict("cannot resend %s: %v", deliveryID, err)
	}
	return nil
}
