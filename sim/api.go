package sim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/payhook/payhook/sim/flavour"
)

// maxBody bounds API request bodies.
const maxBody = 1 << 20

// Handler returns the provider's HTTP API. Every request needs
// "Authorization: Bearer <key>"; the key selects the environment.
//
//	POST   /webhook_endpoints                    {url, events, api_version} → 201, with its secret (only here)
//	GET    /webhook_endpoints                    {data: [...]}
//	GET    /webhook_endpoints/{id}
//	POST   /webhook_endpoints/{id}               {url?, events?, api_version?}
//	DELETE /webhook_endpoints/{id}
//	POST   /webhook_endpoints/{id}/rotate_secret → {id, secret}
//	POST   /webhook_endpoints/{id}/test          → 202, the webhook_endpoint.test event
//	GET    /webhook_endpoints/{id}/deliveries    {data: [attempts]}
//	POST   /deliveries/{id}/resend               → 202
//	POST   /checkouts                            {amount, currency, metadata: {order_id}} → 201
//	GET    /checkouts/{id}
//	POST   /checkouts/{id}/complete              {amount_to_capture?} → the payment (less than the
//	                                             checkout's amount: a partial capture, stripe flavour only)
//	GET    /payments/{id}
//	POST   /payments/{id}/chargeback             → the payment, charged_back (its dispute_id set)
//	POST   /payments/{id}/chargeback/win         → the payment, back to succeeded or partially_refunded
//	POST   /refunds                              {payment_id, amount, simulate_failure?} + Idempotency-Key → 201
//	GET    /refunds/{id}
//	POST   /v1/refunds                           stripe flavour: form payment_intent|charge, amount + Idempotency-Key → 200
//	POST   /subscriptions                        {customer, plan} → 201
//	GET    /subscriptions/{id}
//	POST   /subscriptions/{id}                   {plan}
//	POST   /subscriptions/{id}/renew|cancel|end
//	POST   /invoices                             {amount, currency, order_id} → 201
//	GET    /invoices/{id}
//	POST   /invoices/{id}/settle                 {chain_ref}
//	GET    <Flavour.EventsPath()>                the flavour's events list
//	GET    <Lister.ListPaths()>                  with a flavour.Lister (billete: /payments, /refunds,
//	                                             /subscriptions; stripe: /v1/charges, /v1/refunds,
//	                                             /v1/disputes, /v1/subscriptions; paddle: /transactions,
//	                                             /adjustments, /subscriptions): recent objects
//	GET    <SubscriptionPath()>                  with a flavour.Retriever (stripe: /v1/subscriptions/{id}):
//	                                             the subscription's current state in the provider's shape
//	GET    <Getter.GetPaths()>                   with a flavour.Getter (stripe: /v1/checkout/sessions/{id},
//	                                             /v1/payment_intents/{id}, /v1/charges/{id}[?expand[]=refunds],
//	                                             /v1/refunds/{id}[?expand[]=charge(.refunds)], /v1/disputes/{id};
//	                                             paddle: /transactions/{id}
//	                                             [?include=adjustments], /subscriptions/{id}, in place of the
//	                                             neutral one): one object's current state in the provider's shape
//
// Errors are {"error": {"type", "message"}} with 400 (invalid_request),
// 401 (authentication), 404 (not_found, also unknown routes), 405 (wrong
// method), 409 (conflict) or 429 (rate_limit, beyond Config.APIRate, with
// a Retry-After in seconds).
func (p *Provider) Handler() http.Handler {
	mux := http.NewServeMux()
	h := func(pattern string, f func(w http.ResponseWriter, r *http.Request, env string) error) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			env, err := p.EnvForKey(bearer(r))
			if err == nil {
				if wait := p.apiWait(env); wait > 0 {
					w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
					err = ErrRateLimit
				}
			}
			if err == nil {
				err = f(w, r, env)
			}
			if err != nil {
				writeError(w, err)
			}
		})
	}

	h("POST /webhook_endpoints", func(w http.ResponseWriter, r *http.Request, env string) error {
		var in struct {
			URL        string   `json:"url"`
			Events     []string `json:"events"`
			APIVersion string   `json:"api_version"`
		}
		if err := decode(r, &in); err != nil {
			return err
		}
		e, secret, err := p.CreateEndpoint(env, in.URL, in.Events, in.APIVersion)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusCreated, struct {
			Endpoint
			Secret string `json:"secret"`
		}{e, secret})
	})
	h("GET /webhook_endpoints", func(w http.ResponseWriter, r *http.Request, env string) error {
		eps, err := p.Endpoints(env)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, list(eps))
	})
	h("GET /webhook_endpoints/{id}", func(w http.ResponseWriter, r *http.Request, env string) error {
		return reply(w, http.StatusOK)(p.GetEndpoint(env, r.PathValue("id")))
	})
	h("POST /webhook_endpoints/{id}", func(w http.ResponseWriter, r *http.Request, env string) error {
		var in EndpointUpdate
		if err := decode(r, &in); err != nil {
			return err
		}
		return reply(w, http.StatusOK)(p.UpdateEndpoint(env, r.PathValue("id"), in))
	})
	h("DELETE /webhook_endpoints/{id}", func(w http.ResponseWriter, r *http.Request, env string) error {
		id := r.PathValue("id")
		if err := p.DeleteEndpoint(env, id); err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
	})
	h("POST /webhook_endpoints/{id}/rotate_secret", func(w http.ResponseWriter, r *http.Request, env string) error {
		id := r.PathValue("id")
		secret, err := p.RotateSecret(env, id)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, map[string]string{"id": id, "secret": secret})
	})
	h("POST /webhook_endpoints/{id}/test", func(w http.ResponseWriter, r *http.Request, env string) error {
		ev, err := p.SendTest(env, r.PathValue("id"))
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusAccepted, eventJSON(ev))
	})
	h("GET /webhook_endpoints/{id}/deliveries", func(w http.ResponseWriter, r *http.Request, env string) error {
		log, err := p.Deliveries(env, r.PathValue("id"))
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, list(log))
	})
	h("POST /deliveries/{id}/resend", func(w http.ResponseWriter, r *http.Request, env string) error {
		id := r.PathValue("id")
		if err := p.ResendDelivery(env, id); err != nil {
			return err
		}
		return writeJSON(w, http.StatusAccepted, map[string]any{"delivery_id": id, "resent": true})
	})

	h("POST /checkouts", func(w http.ResponseWriter, r *http.Request, env string) error {
		var in struct {
			Amount   int64             `json:"amount"`
			Currency string            `json:"currency"`
			Metadata map[string]string `json:"metadata"`
		}
		if err := decode(r, &in); err != nil {
			return err
		}
		return reply(w, http.StatusCreated)(p.CreateCheckout(env, in.Amount, in.Currency, in.Metadata["order_id"]))
	})
	h("GET /checkouts/{id}", func(w http.ResponseWriter, r *http.Request, env string) error {
		return reply(w, http.StatusOK)(p.GetCheckout(env, r.PathValue("id")))
	})
	h("POST /checkouts/{id}/complete", func(w http.ResponseWriter, r *http.Request, env string) error {
		var in struct {
			AmountToCapture int64 `json:"amount_to_capture"`
		}
		if err := decode(r, &in); err != nil {
			return err
		}
		return reply(w, http.StatusOK)(p.CompleteCheckoutCapture(env, r.PathValue("id"), in.AmountToCapture))
	})
	h("GET /payments/{id}", func(w http.ResponseWriter, r *http.Request, env string) error {
		return reply(w, http.StatusOK)(p.GetPayment(env, r.PathValue("id")))
	})
	h("POST /payments/{id}/chargeback", func(w http.ResponseWriter, r *http.Request, env string) error {
		return reply(w, http.StatusOK)(p.Chargeback(env, r.PathValue("id")))
	})
	h("POST /payments/{id}/chargeback/win", func(w http.ResponseWriter, r *http.Request, env string) error {
		return reply(w, http.StatusOK)(p.WinChargeback(env, r.PathValue("id")))
	})
	h("POST /refunds", func(w http.ResponseWriter, r *http.Request, env string) error {
		var in struct {
			PaymentID       string `json:"payment_id"`
			Amount          int64  `json:"amount"`
			SimulateFailure bool   `json:"simulate_failure"`
		}
		if err := decode(r, &in); err != nil {
			return err
		}
		ref, replayed, err := p.refund(env, in.PaymentID, in.Amount, r.Header.Get("Idempotency-Key"), in.SimulateFailure)
		if err != nil {
			return err
		}
		if replayed {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		return writeJSON(w, http.StatusCreated, ref)
	})
	h("GET /refunds/{id}", func(w http.ResponseWriter, r *http.Request, env string) error {
		return reply(w, http.StatusOK)(p.GetRefund(env, r.PathValue("id")))
	})
	if p.cfg.Flavour.Provider() == "stripe" {
		// Stripe's create-refund, form-encoded; the simulator's charge and
		// payment intent are both its payment.
		h("POST /v1/refunds", func(w http.ResponseWriter, r *http.Request, env string) error {
			if err := r.ParseForm(); err != nil {
				return invalid("the body is not a form: %v", err)
			}
			pay := cmp.Or(r.PostForm.Get("payment_intent"), r.PostForm.Get("charge"))
			amount, err := strconv.ParseInt(r.PostForm.Get("amount"), 10, 64)
			if err != nil {
				return invalid("amount must be an integer of minor units, got %q", r.PostForm.Get("amount"))
			}
			ref, replayed, err := p.refund(env, pay, amount, r.Header.Get("Idempotency-Key"), false)
			if err != nil {
				return err
			}
			if replayed {
				w.Header().Set("Idempotent-Replayed", "true")
			}
			return writeJSON(w, http.StatusOK, map[string]any{"id": ref.ID, "object": "refund", "amount": ref.Amount,
				"currency": ref.Currency, "payment_intent": ref.PaymentID, "charge": ref.PaymentID, "status": ref.Status,
				"reason": r.PostForm.Get("reason"), "created": ref.CreatedAt.Unix()})
		})
	}

	h("POST /subscriptions", func(w http.ResponseWriter, r *http.Request, env string) error {
		var in struct {
			Customer string `json:"customer"`
			Plan     string `json:"plan"`
		}
		if err := decode(r, &in); err != nil {
			return err
		}
		return reply(w, http.StatusCreated)(p.CreateSubscription(env, in.Customer, in.Plan))
	})
	if gf, ok := p.cfg.Flavour.(flavour.Getter); !ok || gf.GetPaths()["/subscriptions/{id}"] == "" {
		// Paddle's flavour serves this route in Paddle's shape (below).
		h("GET /subscriptions/{id}", func(w http.ResponseWriter, r *http.Request, env string) error {
			return reply(w, http.StatusOK)(p.GetSubscription(env, r.PathValue("id")))
		})
	}
	h("POST /subscriptions/{id}", func(w http.ResponseWriter, r *http.Request, env string) error {
		var in struct {
			Plan string `json:"plan"`
		}
		if err := decode(r, &in); err != nil {
			return err
		}
		return reply(w, http.StatusOK)(p.UpdateSubscription(env, r.PathValue("id"), in.Plan))
	})
	for action, f := range map[string]func(env, id string) (Subscription, error){
		"renew": p.RenewSubscription, "cancel": p.CancelSubscription, "end": p.EndSubscription,
	} {
		h("POST /subscriptions/{id}/"+action, func(w http.ResponseWriter, r *http.Request, env string) error {
			return reply(w, http.StatusOK)(f(env, r.PathValue("id")))
		})
	}

	h("POST /invoices", func(w http.ResponseWriter, r *http.Request, env string) error {
		var in struct {
			Amount   int64  `json:"amount"`
			Currency string `json:"currency"`
			OrderID  string `json:"order_id"`
		}
		if err := decode(r, &in); err != nil {
			return err
		}
		return reply(w, http.StatusCreated)(p.CreateInvoice(env, in.Amount, in.Currency, in.OrderID))
	})
	h("GET /invoices/{id}", func(w http.ResponseWriter, r *http.Request, env string) error {
		return reply(w, http.StatusOK)(p.GetInvoice(env, r.PathValue("id")))
	})
	h("POST /invoices/{id}/settle", func(w http.ResponseWriter, r *http.Request, env string) error {
		var in struct {
			ChainRef string `json:"chain_ref"`
		}
		if err := decode(r, &in); err != nil {
			return err
		}
		return reply(w, http.StatusOK)(p.SettleInvoice(env, r.PathValue("id"), in.ChainRef))
	})

	// Flavours that serve resources in their provider's shape (Stripe).
	if rf, ok := p.cfg.Flavour.(flavour.Retriever); ok {
		h("GET "+rf.SubscriptionPath(), func(w http.ResponseWriter, r *http.Request, env string) error {
			s, err := p.GetSubscription(env, r.PathValue("id"))
			if err != nil {
				return err
			}
			body, err := rf.Subscription(s.event(env))
			if err != nil {
				return err
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.Write(body)
			return nil
		})
	}

	// Flavours that retrieve each kind of object in their provider's
	// shape (Stripe: checkout sessions, payment intents, charges, refunds,
	// disputes), as receivers fetch them (sim/get.go).
	if gf, ok := p.cfg.Flavour.(flavour.Getter); ok {
		for path, kind := range gf.GetPaths() {
			h("GET "+path, p.getHandler(gf, kind))
		}
	}

	// Flavours that list objects (payments, refunds, disputes,
	// subscriptions) in their provider's shape, for reconciliation.
	if lf, ok := p.cfg.Flavour.(flavour.Lister); ok {
		for path, kind := range lf.ListPaths() {
			h("GET "+path, p.listHandler(lf, kind))
		}
	}

	h("GET "+p.cfg.Flavour.EventsPath(), func(w http.ResponseWriter, r *http.Request, env string) error {
		q, err := p.cfg.Flavour.EventsQuery(r)
		if err != nil {
			return invalid("%v", err)
		}
		page, next, err := p.events(env, q)
		if err != nil {
			return err
		}
		body, err := p.cfg.Flavour.EventsPage(page, next)
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(body)
		return nil
	})

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		// No route: authenticate first, then let the mux say 404 or 405
		// (with its Allow header), in JSON.
		if _, err := p.EnvForKey(bearer(r)); err != nil {
			writeError(w, err)
			return
		}
		cw := &statusCapture{header: http.Header{}}
		mux.ServeHTTP(cw, r)
		if allow := cw.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		if cw.status == http.StatusMethodNotAllowed {
			writeJSON(w, cw.status, errorBody("invalid_request", fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path)))
			return
		}
		writeError(w, &Error{Type: "not_found", Message: "no route " + r.Method + " " + r.URL.Path})
	})
}

// statusCapture records the status the mux would answer with.
type statusCapture struct {
	header http.Header
	status int
}

func (c *statusCapture) Header() http.Header         { return c.header }
func (c *statusCapture) Write(b []byte) (int, error) { return len(b), nil }
func (c *statusCapture) WriteHeader(status int)      { c.status = status }

func bearer(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	if len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		return strings.TrimSpace(auth[7:])
	}
	return ""
}

// decode reads r's JSON body into v; an empty body leaves v as it is.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return invalid("reading the body: %v", err)
	}
	if len(body) > maxBody {
		return invalid("body over %d bytes", maxBody)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("malformed JSON body: %v", err)
	}
	if dec.More() {
		return invalid("malformed JSON body: more than one value")
	}
	return nil
}

// reply returns a function writing a Go method's (value, error) result.
func reply(w http.ResponseWriter, status int) func(any, error) error {
	return func(v any, err error) error {
		if err != nil {
			return err
		}
		return writeJSON(w, status, v)
	}
}

func list[T any](items []T) map[string]any {
	return map[string]any{"object": "list", "data": items}
}

// eventJSON is the neutral JSON form of an event.
func eventJSON(ev flavour.Event) map[string]any {
	return map[string]any{
		"id": ev.ID, "type": ev.Type, "created_at": ts(ev.CreatedAt), "environment": ev.Environment,
		"api_version": ev.APIVersion, "object_id": ev.ObjectID, "data": ev.Data, "seq": ev.Seq,
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n')) // a client gone away is not an API error
	return nil
}

func errorBody(typ, msg string) map[string]any {
	return map[string]any{"error": map[string]string{"type": typ, "message": msg}}
}

// writeError writes err as an API error; anything but an *Error is a 500.
func writeError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		writeJSON(w, http.StatusInternalServerError, errorBody("api_error", err.Error()))
		return
	}
	status := map[string]int{
		"invalid_request": http.StatusBadRequest,
		"authentication":  http.StatusUnauthorized,
		"not_found":       http.StatusNotFound,
		"conflict":        http.StatusConflict,
		"rate_limit":      http.StatusTooManyRequests,
	}[e.Type]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	switch status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="payhook sim"`)
	case http.StatusTooManyRequests:
		if w.Header().Get("Retry-After") == "" {
			w.Header().Set("Retry-After", "1")
		}
	}
	writeJSON(w, status, errorBody(e.Type, e.Message))
}
