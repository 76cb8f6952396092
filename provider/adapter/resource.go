package adapter

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/signing"
)

// Resource is the object an event is about, as far as the provider's API
// can retrieve it: where the object is in the event's payload and the
// route that returns its current state. Processing fetches it (outside
// any transaction) and maps the event with the fetched object in place of
// the one the payload carried: the event tells that something changed,
// the resource says what it is now.
type Resource struct {
	// Path is the object keys from the top of the payload to the object,
	// e.g. {"data", "object"}. The object's id is its "id". The fetched
	// object takes its place for the mapping only: the stored payload is
	// never changed.
	Path []string
	// Route is the API path of one object, "{id}" standing for its
	// (path-escaped) id, e.g. "v1/disputes/{id}".
	Route string
	// Query, if set, is sent with the request (Stripe: expand[]=refunds).
	Query url.Values
	// RouteField, if set, is the object's field whose value the route
	// takes instead of its id: an object without a route of its own is
	// read through its parent's (a Paddle adjustment through its
	// transaction_id); the answer must still be the object of its id.
	RouteField string
}

// ID returns the id of the object r names in ev's payload, read strictly
// as the envelope is (a case variant such as "ID" that encoding/json
// would have taken instead is refused). Errors wrap payhook.ErrMalformed.
func (r Resource) ID(ev *payhook.Event) (string, error) {
	o, err := signing.ObjectAt(ev.Payload, r.Path...)
	var id string
	if err == nil {
		id, err = o.RequiredString("id")
	}
	if err != nil {
		return "", fmt.Errorf("event %s has no %s.id to fetch: %w", ev.EventID, strings.Join(r.Path, "."), err)
	}
	return id, nil
}

// URLPath returns r's Route for the object id.
func (r Resource) URLPath(id string) string {
	return strings.ReplaceAll(r.Route, "{id}", url.PathEscape(id))
}

// Resources maps event types to the Resource each is about. A key ending
// in "*" stands for every type it prefixes ("customer.subscription.*");
// an exact key wins over a prefix, a longer prefix over a shorter one.
type Resources map[string]Resource

// For returns the Resource events of type eventType are about, and
// whether there is one.
func (rs Resources) For(eventType string) (Resource, bool) {
	if r, ok := rs[eventType]; ok && !strings.HasSuffix(eventType, "*") {
		return r, true
	}
	var best string
	var found Resource
	for k, r := range rs {
		p, ok := strings.CutSuffix(k, "*")
		if ok && strings.HasPrefix(eventType, p) && len(k) > len(best) {
			best, found = k, r
		}
	}
	return found, best != ""
}

// FetchResource is a Client's Fetch over rs: for an event of a type rs
// lists, it reads the object's id in the payload (Resource.ID) and returns
// what get answers for it, which must be that object (one JSON object
// whose "id" is the id asked for); nil for every other event. get is
// given the id the route takes (the RouteField's value, else the id) and
// the object's id. name
// prefixes the errors. An event that names no object wraps
// payhook.ErrMalformed; get's errors are returned wrapped (a 404 wraps
// payhook.ErrNotFound); an answer that is not the object asked for is a
// plain error, to be retried: a proxy's page or another object is never
// mapped.
func FetchResource(ctx context.Context, name string, rs Resources, ev *payhook.Event,
	get func(ctx context.Context, r Resource, routeID, id string) ([]byte, error)) ([]byte, error) {
	r, ok := rs.For(ev.Type)
	if !ok {
		return nil, nil
	}
	id, err := r.ID(ev)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	routeID := id
	if r.RouteField != "" {
		o, err := signing.ObjectAt(ev.Payload, r.Path...)
		if err == nil {
			routeID, err = o.RequiredString(r.RouteField)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: event %s has no %s.%s to fetch: %w", name, ev.EventID, strings.Join(r.Path, "."), r.RouteField, err)
		}
	}
	b, err := get(ctx, r, routeID, id)
	if err != nil {
		return nil, fmt.Errorf("%s: fetch the %s of event %s: %w", name, id, ev.EventID, err)
	}
	o, err := signing.ParseObject(b)
	var got string
	if err == nil {
		got, err = o.RequiredString("id")
	}
	if err == nil && got != id {
		err = fmt.Errorf("it is %q", got)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: fetch the %s of event %s: the answer is not that object (%.100q): %v", name, id, ev.EventID, b, err)
	}
	return b, nil
}
