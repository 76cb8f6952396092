package flavour

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/payhook/payhook/provider/standard"
)

// billete is the recipe's provider: the neutral vocabulary as is, signed
// the Standard Webhooks way.
type billete struct{}

// Billete returns the flavour of the recipe's provider: events in the
// neutral vocabulary, {"id","type","created_at","environment",
// "api_version","data"}, signed with Standard Webhooks headers
// (webhook-id is the event id) and a "whsec_" secret; events API
// GET /events?type=&created_from=&cursor=&limit=.
func Billete() Flavour { return billete{} }

func (billete) Name() string     { return "billete" }
func (billete) Provider() string { return "billete" }

// NewSecret returns "whsec_" + base64 of 24 random bytes.
func (f billete) NewSecret() string { return f.NewSecretFrom(rand.Reader) }

// NewSecretFrom is NewSecret drawing from r; a read error panics, as in
// randomString.
func (billete) NewSecretFrom(r io.Reader) string {
	b := make([]byte, 24)
	if _, err := io.ReadFull(r, b); err != nil {
		panic(fmt.Sprintf("flavour: draw a secret: %v", err))
	}
	return standard.SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// billeteBody is the neutral event as billete delivers and lists it.
type billeteBody struct {
	ID          string         `json:"id"`
	Object      string         `json:"object"`
	Type        string         `json:"type"`
	CreatedAt   string         `json:"created_at"`
	Environment string         `json:"environment"`
	APIVersion  string         `json:"api_version"`
	Data        map[string]any `json:"data"`
}

func (billete) Body(ev Event, _ string) ([]byte, error) {
	b, err := json.Marshal(billeteBody{
		ID: ev.ID, Object: "event", Type: ev.Type,
		CreatedAt:   ev.CreatedAt.UTC().Format(time.RFC3339Nano),
		Environment: ev.Environment, APIVersion: ev.APIVersion, Data: clone(ev.Data),
	})
	if err != nil {
		return nil, fmt.Errorf("billete: render %s: %w", ev.ID, err)
	}
	return b, nil
}

// Sign returns webhook-id (the event id), webhook-timestamp and one
// webhook-signature "v1,<base64>" entry per secret, space-separated.
func (billete) Sign(secrets []string, ev Event, _ string, body []byte, at time.Time) (http.Header, error) {
	if err := checkSecrets("billete", secrets); err != nil {
		return nil, err
	}
	h := baseHeader("Billete-Webhooks/1.0 (payhook sim)")
	var sigs []string
	for _, s := range secrets {
		sh, err := standard.Sign(s, ev.ID, at, body)
		if err != nil {
			return nil, fmt.Errorf("billete: %w", err)
		}
		h.Set(standard.IDHeader, sh.Get(standard.IDHeader))
		h.Set(standard.TimestampHeader, sh.Get(standard.TimestampHeader))
		sigs = append(sigs, sh.Get(standard.SignatureHeader))
	}
	h.Set(standard.SignatureHeader, strings.Join(sigs, " "))
	return h, nil
}

func (billete) EventsPath() string { return "/events" }

// EventsQuery reads type (neutral names, comma-separated), created_from
// (RFC 3339), cursor (an event id) and limit (1 to 1000); other parameters
// are ignored.
func (billete) EventsQuery(r *http.Request) (Query, error) {
	return listQuery(r, neutralTypes, false)
}

// neutralTypes is the identity mapping.
var neutralTypes = typeMap{}

// listQuery reads the billete-style events query; alsoNeutral lets type
// take neutral names besides m's.
func listQuery(r *http.Request, m typeMap, alsoNeutral bool) (Query, error) {
	p, err := params(r)
	if err != nil {
		return Query{}, err
	}
	var q Query
	if v, ok := p["type"]; ok {
		if q.Type, err = m.parseTypes("type", v, alsoNeutral); err != nil {
			return Query{}, err
		}
	}
	if v, ok := p["created_from"]; ok {
		if q.CreatedFrom, err = parseRFC3339("created_from", v); err != nil {
			return Query{}, err
		}
	}
	if v, ok := p["cursor"]; ok {
		if q.Cursor, err = parseCursor("cursor", v); err != nil {
			return Query{}, err
		}
	}
	if v, ok := p["limit"]; ok {
		if q.Limit, err = parseLimit("limit", v, maxLimit); err != nil {
			return Query{}, err
		}
	}
	return q, nil
}

// listPage is the billete-style page.
type listPage struct {
	Object     string            `json:"object"`
	Data       []json.RawMessage `json:"data"`
	HasMore    bool              `json:"has_more"`
	NextCursor *string           `json:"next_cursor"`
}

// EventsPage renders {"object":"list","data":[...],"has_more":..,
// "next_cursor":"evt_..."|null}.
func (f billete) EventsPage(evs []Event, next string) ([]byte, error) {
	return renderList(evs, next, func(ev Event) ([]byte, error) { return f.Body(ev, "") })
}

// renderList renders the billete-style page with body for each event.
func renderList(evs []Event, next string, body func(Event) ([]byte, error)) ([]byte, error) {
	data, err := rawList(evs, body)
	if err != nil {
		return nil, err
	}
	p := listPage{Object: "list", Data: data, HasMore: next != ""}
	if next != "" {
		p.NextCursor = &next
	}
	return json.Marshal(p)
}

func (billete) EventID(ev Event) string { return ev.ID }
