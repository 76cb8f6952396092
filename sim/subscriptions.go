package sim

import (
	"slices"
	"time"

	"github.com/payhook/payhook/sim/flavour"
)

// SubscriptionPeriod is the length of a subscription period: creating a
// subscription starts one, renewing it adds one.
const SubscriptionPeriod = 30 * 24 * time.Hour

// Subscription is a customer's subscription to a plan.
type Subscription struct {
	ID               string    `json:"id"`
	Object           string    `json:"object"`
	Customer         string    `json:"customer"`
	Plan             string    `json:"plan"`
	Status           string    `json:"status"` // active | canceled | ended
	CurrentPeriodEnd time.Time `json:"current_period_end"`
	CreatedAt        time.Time `json:"created_at"`
	UpdatedAt        time.Time `json:"updated_at"`
}

// CreateSubscription subscribes a customer to a plan (subscription.created).
func (p *Provider) CreateSubscription(env, customer, plan string) (Subscription, error) {
	if customer == "" || plan == "" {
		return Subscription{}, invalid("customer and plan are required")
	}
	return change(p, env, func(t *tx) (Subscription, error) {
		now := p.now()
		s := &Subscription{
			ID: p.newID("sub_"), Object: "subscription", Customer: customer, Plan: plan,
			Status: "active", CurrentPeriodEnd: now.Add(SubscriptionPeriod),
			CreatedAt: now, UpdatedAt: now,
		}
		t.w.subs[s.ID] = s
		t.w.subOrder = append(t.w.subOrder, s.ID)
		t.emit("subscription.created", s.ID, s.data(), "")
		return *s, nil
	})
}

// GetSubscription returns a subscription of env.
func (p *Provider) GetSubscription(env, id string) (Subscription, error) {
	return lookup(p, env, "subscription", id, func(w *world) map[string]*Subscription { return w.subs }, func(v *Subscription) Subscription { return *v })
}

// event returns s's current state as the event of its last change would
// carry it (see flavour.Retriever).
func (s *Subscription) event(env string) flavour.Event {
	typ := map[string]string{"canceled": "subscription.canceled", "ended": "subscription.ended"}[s.Status]
	if typ == "" {
		typ = "subscription.updated"
	}
	return flavour.Event{Type: typ, CreatedAt: s.UpdatedAt, Environment: env, ObjectID: s.ID, Data: s.data()}
}

// changeSubscription applies f to subscription id if its status is one
// of from, and emits typ.
func (p *Provider) changeSubscription(env, id, typ string, from []string, f func(s *Subscription, now time.Time)) (Subscription, error) {
	return change(p, env, func(t *tx) (Subscription, error) {
		s, ok := t.w.subs[id]
		if !ok {
			return Subscription{}, notFound("subscription", id)
		}
		if !slices.Contains(from, s.Status) {
			return Subscription{}, conflict("subscription %s is %s", id, s.Status)
		}
		now := p.now()
		// Every change moves updated_at forward, by a microsecond (what
		// databases keep) at least, so that it orders the subscription's
		// states even when the clock has not moved.
		if next := s.UpdatedAt.Add(time.Microsecond); now.Before(next) {
			now = next
		}
		f(s, now)
		s.UpdatedAt = now
		t.emit(typ, s.ID, s.data(), "")
		return *s, nil
	})
}

// UpdateSubscription changes the plan of an active subscription
// (subscription.updated).
func (p *Provider) UpdateSubscription(env, id, plan string) (Subscription, error) {
	if plan == "" {
		return Subscription{}, invalid("plan is required")
	}
	return p.changeSubscription(env, id, "subscription.updated", []string{"active"},
		func(s *Subscription, _ time.Time) { s.Plan = plan })
}

// RenewSubscription extends an active subscription by one period
// (subscription.renewed).
func (p *Provider) RenewSubscription(env, id string) (Subscription, error) {
	return p.changeSubscription(env, id, "subscription.renewed", []string{"active"},
		func(s *Subscription, _ time.Time) { s.CurrentPeriodEnd = s.CurrentPeriodEnd.Add(SubscriptionPeriod) })
}

// CancelSubscription cancels an active subscription; it runs until it
// ends (subscription.canceled).
func (p *Provider) CancelSubscription(env, id string) (Subscription, error) {
	return p.changeSubscription(env, id, "subscription.canceled", []string{"active"},
		func(s *Subscription, _ time.Time) { s.Status = "canceled" })
}

// EndSubscription ends an active or canceled subscription, for good
// (subscription.ended).
func (p *Provider) EndSubscription(env, id string) (Subscription, error) {
	return p.changeSubscription(env, id, "subscription.ended", []string{"active", "canceled"},
		func(s *Subscription, now time.Time) {
			s.Status = "ended"
			if now.Before(s.CurrentPeriodEnd) {
				s.CurrentPeriodEnd = now
			}
		})
}

func (s *Subscription) data() map[string]any {
	return map[string]any{
		"id": s.ID, "object": s.Object, "customer": s.Customer, "plan": s.Plan, "status": s.Status,
		"current_period_end": ts(s.CurrentPeriodEnd), "created_at": ts(s.CreatedAt), "updated_at": ts(s.UpdatedAt),
	}
}
