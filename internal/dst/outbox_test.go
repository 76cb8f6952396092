package dst

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/payhook/payhook/outbox"
)

// sinkName is the application's after-commit effect the harness owns: it
// matches every fact.
const sinkName = "app"

// sinkPlan is what a seed chose for the sink, drawn from a stream of its
// own so that the rest of the plan is what it was before the outbox.
type sinkPlan struct {
	// unrecorded makes the sink an outbox.Unrecorded one, as serve's log
	// is: its facts get no delivery row but an untold one, told after
	// the commit (drawn from a stream of its own too).
	unrecorded bool
	fail       float64 // probability that an attempt fails
	// crashAfter holds attempt numbers right after whose side effect
	// the process dies, before the delivery is recorded.
	crashAfter map[int]bool
}

func newSinkPlan(seed int64) (sinkPlan, *rand.Rand) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x0b0c))
	p := sinkPlan{fail: rng.Float64() * 0.3, crashAfter: map[int]bool{},
		unrecorded: rand.New(rand.NewPCG(uint64(seed), 0x0b0d)).IntN(2) == 0}
	for range rng.IntN(3) {
		p.crashAfter[1+rng.IntN(60)] = true
	}
	return p, rng
}

// sink is the application's side effect: it records each fact it is told,
// checks at that moment that the fact's billing change is committed, and
// fails or crashes the process as the seed says.
type sink struct {
	h        *harness
	plan     sinkPlan
	rng      *rand.Rand
	attempts int
	// told counts the successful sends of each fact id: at least once
	// each, more after a crash between the send and its record.
	told map[string]int
}

func (s *sink) send(ctx context.Context, f outbox.Fact) error {
	s.attempts++
	s.h.unarmed(func() {
		if why := s.h.unbacked(f); why != "" {
			s.h.violate("the sink was told %s %s (%s) %s", f.Type, f.Subject, f.ID, why)
		}
	})
	if s.rng.Float64() < s.plan.fail {
		return errors.New("dst: the application's endpoint failed")
	}
	s.told[f.ID]++
	if s.plan.crashAfter[s.attempts] {
		s.h.faults.die() // told, and the delivery not recorded yet
	}
	return nil
}

// unrecordedSink is the sink as an outbox.Unrecorded one.
type unrecordedSink struct{ s *sink }

func (u unrecordedSink) Send(ctx context.Context, f outbox.Fact) (outbox.Receipt, error) {
	return outbox.Receipt{}, u.s.send(ctx, f)
}

func (unrecordedSink) Unrecorded() {}

// add registers the sink with box, as its plan says.
func (s *sink) add(box *outbox.Outbox) error {
	if s.plan.unrecorded {
		return box.Add(sinkName, nil, unrecordedSink{s})
	}
	return box.AddFunc(sinkName, nil, s.send)
}

// backing says, per fact type, the committed billing row that must
// exist for a fact of that type about subject: a key prefix and a query
// taking (source, key).
var backing = map[string]struct{ prefix, query string }{
	outbox.PaymentSucceeded:     {"", `SELECT count(*) FROM payhook_payments WHERE source = $1 AND ref = $2 AND kind = 'fiat'`},
	outbox.PaymentRefunded:      {"refund:", `SELECT count(*) FROM payhook_ledger_postings WHERE source = $1 AND fact_key = $2`},
	outbox.PaymentRefundFailed:  {"refund_failed:", `SELECT count(*) FROM payhook_ledger_postings WHERE source = $1 AND fact_key = $2`},
	outbox.PaymentChargedBack:   {"chargeback:", `SELECT count(*) FROM payhook_ledger_postings WHERE source = $1 AND fact_key = $2`},
	outbox.PaymentChargebackWon: {"chargeback_won:", `SELECT count(*) FROM payhook_ledger_postings WHERE source = $1 AND fact_key = $2`},
	outbox.CryptoSettled:        {"settle:", `SELECT count(*) FROM payhook_ledger_postings WHERE source = $1 AND fact_key = $2`},
	outbox.OrderPaid:            {"", `SELECT count(*) FROM payhook_orders WHERE source = $1 AND order_id = $2 AND status = 'paid'`},
	outbox.SubscriptionCreated:  {"", `SELECT count(*) FROM payhook_subscriptions WHERE source = $1 AND ref = $2`},
	outbox.SubscriptionUpdated:  {"", `SELECT count(*) FROM payhook_subscriptions WHERE source = $1 AND ref = $2`},
	outbox.SubscriptionEnded:    {"", `SELECT count(*) FROM payhook_subscriptions WHERE source = $1 AND ref = $2 AND ended_at IS NOT NULL`},
	outbox.AlertRaised:          {"", `SELECT count(*) FROM payhook_alerts WHERE $1 <> '-' AND subject = $2`},
}

// unbacked says why fact f tells of a billing change that is not
// committed, or "" when it is.
func (h *harness) unbacked(f outbox.Fact) string {
	b, ok := backing[f.Type]
	if !ok {
		return "of a type the harness does not know"
	}
	var n int
	if err := h.db.SQL.QueryRowContext(h.ctx, b.query, f.Source, b.prefix+f.Subject).Scan(&n); err != nil {
		h.fatalf("backing of fact %s: %v", f.ID, err)
	}
	if n == 0 {
		return "and its billing change is not committed"
	}
	return ""
}

// checkFacts checks the outbox at any instant: every fact is backed by
// its committed billing change and was written with its delivery, or,
// for an Unrecorded sink, with its untold row, unless the sink was told
// it (in the harness every transaction that writes a fact has the
// outbox); and, when final, every billing change has its fact, every
// delivery was made, no fact is left untold and the sink was told each
// fact at least once.
func (h *harness) checkFacts(when string, final bool) {
	facts, err := outbox.List(h.ctx, h.db, outbox.Filter{Limit: 1 << 30})
	if err != nil {
		h.fatalf("%s: list facts: %v", when, err)
	}
	byKey := map[string]bool{}
	for _, f := range facts {
		if why := h.unbacked(f.Fact); why != "" {
			h.fatalf("%s: fact %s %s (%s) is stored %s", when, f.Type, f.Subject, f.ID, why)
		}
		byKey[f.Type+" "+f.Subject] = true
	}
	rows, err := h.db.SQL.QueryContext(h.ctx, `SELECT f.fact_id, f.routed FROM payhook_facts f WHERE NOT f.routed OR NOT EXISTS
			(SELECT 1 FROM payhook_deliveries d WHERE d.fact = f.id AND d.sink = '`+sinkName+`')
		AND NOT EXISTS (SELECT 1 FROM payhook_untold_facts u WHERE u.fact = f.id) ORDER BY f.id`)
	if err != nil {
		h.fatalf("%s: facts without a delivery: %v", when, err)
	}
	type bareFact struct {
		id     string
		routed bool
	}
	var bare []bareFact
	for rows.Next() {
		var f bareFact
		if err := rows.Scan(&f.id, &f.routed); err != nil {
			h.fatalf("%s: facts without a delivery: %v", when, err)
		}
		bare = append(bare, f)
	}
	rows.Close()
	for _, f := range bare {
		// An Unrecorded sink's fact, once told, keeps no row but itself.
		if !f.routed || !h.sink.plan.unrecorded || h.sink.told[f.id] == 0 {
			h.fatalf("%s: fact %s was written without its delivery", when, f.id)
		}
	}
	if !final {
		return
	}
	for _, f := range facts {
		if h.sink.told[f.ID] == 0 {
			h.fatalf("%s: fact %s %s (%s) was never told the sink", when, f.Type, f.Subject, f.ID)
		}
	}
	var untold int
	if err := h.db.SQL.QueryRowContext(h.ctx, `SELECT count(*) FROM payhook_untold_facts`).Scan(&untold); err != nil || untold != 0 {
		h.fatalf("%s: %d facts left untold (%v)", when, untold, err)
	}
	for _, e := range h.expectedFacts() {
		if !byKey[e] {
			h.fatalf("%s: no fact %s, though billing's state has its change", when, e)
		}
	}
	rows, err = h.db.SQL.QueryContext(h.ctx, `SELECT f.fact_id, d.status FROM payhook_deliveries d
		JOIN payhook_facts f ON f.id = d.fact ORDER BY d.id`)
	if err != nil {
		h.fatalf("%s: list deliveries: %v", when, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			h.fatalf("%s: list deliveries: %v", when, err)
		}
		if status != outbox.StatusDelivered || h.sink.told[id] == 0 {
			h.fatalf("%s: fact %s: delivery %s, told the sink %d times", when, id, status, h.sink.told[id])
		}
	}
}

// expectedFacts lists the facts ("type subject") that billing's final
// state says were told: one per posting, paid order, subscription and
// ended subscription.
func (h *harness) expectedFacts() []string {
	var out []string
	byKind := map[string]string{"capture": outbox.PaymentSucceeded, "refund": outbox.PaymentRefunded,
		"refund_failed": outbox.PaymentRefundFailed, "chargeback": outbox.PaymentChargedBack,
		"chargeback_won": outbox.PaymentChargebackWon, "settle": outbox.CryptoSettled}
	for _, q := range []string{
		// A zero refund is the marker of a failure told first: only the
		// failure is told.
		`SELECT kind, fact_key FROM payhook_ledger_postings WHERE NOT (kind = 'refund' AND requested_amount = 0) ORDER BY id`,
		`SELECT 'order', order_id FROM payhook_orders WHERE status = 'paid' ORDER BY id`,
		`SELECT 'subscription', ref FROM payhook_subscriptions ORDER BY id`,
		`SELECT 'ended', ref FROM payhook_subscriptions WHERE ended_at IS NOT NULL ORDER BY id`,
	} {
		rows, err := h.db.SQL.QueryContext(h.ctx, q)
		if err != nil {
			h.fatalf("expected facts: %v", err)
		}
		for rows.Next() {
			var kind, key string
			if err := rows.Scan(&kind, &key); err != nil {
				h.fatalf("expected facts: %v", err)
			}
			switch kind {
			case "order":
				out = append(out, outbox.OrderPaid+" "+key)
			case "subscription":
				out = append(out, outbox.SubscriptionCreated+" "+key)
			case "ended":
				out = append(out, outbox.SubscriptionEnded+" "+key)
			default:
				_, subject, _ := strings.Cut(key, ":")
				out = append(out, byKind[kind]+" "+subject)
			}
		}
		rows.Close()
	}
	return out
}

// violate records a broken invariant seen inside payhook's code, whose
// panics it recovers (a sink, OnDone): the harness raises it after the
// step.
func (h *harness) violate(format string, args ...any) {
	if h.violation == "" {
		h.violation = fmt.Sprintf(format, args...)
	}
}

// checkViolation raises what violate recorded.
func (h *harness) checkViolation() {
	if h.violation != "" {
		h.fatalf("%s", h.violation)
	}
}
