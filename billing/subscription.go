package billing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/outbox"
	"github.com/payhook/payhook/store"
)

// statusRanks orders subscription statuses for snapshots of the same
// time, a total order: ended over canceled over the not-paid statuses
// (unpaid, past_due, paused) over active over incomplete (Stripe creates a
// subscription incomplete and makes it active when its first invoice is
// paid, often within one second).
//
// Only active and canceled (running until its period ends) grant access:
// incomplete, past_due, unpaid and paused are subscriptions not paid for,
// kept as their own statuses.
var statusRanks = []string{"incomplete", "active", "paused", "past_due", "unpaid", "canceled", "ended"}

// SubscriptionStatuses lists the statuses a subscription can have (every
// stored one is checked to be among them), in statusRanks' order: a copy,
// so that a caller cannot change the ranks.
var SubscriptionStatuses = slices.Clone(statusRanks)

// statusRank is status's rank, from 1; 0 for a status payhook does not
// know.
func statusRank(status string) int {
	for i, s := range statusRanks {
		if s == status {
			return i + 1
		}
	}
	return 0
}

// statusRankSQL is statusRank as an SQL expression of the status column.
func statusRankSQL() string {
	var b strings.Builder
	b.WriteString("CASE status")
	for i, s := range statusRanks {
		fmt.Fprintf(&b, " WHEN '%s' THEN %d", s, i+1)
	}
	b.WriteString(" ELSE 0 END")
	return b.String()
}

// ranksBelow is the condition "the stored row ranks below snapshot f",
// whose values are parameters: (ended, provider_updated_at, status rank,
// current_period_end, plan, customer, earliest ended_at) compared in that
// order, a NULL time below any time. $3 customer, $4 plan, $6
// current_period_end, $7 provider time, $9 ended_at, $10 ended (1 or 0),
// $11 status rank. Which times of f are NULL is known here, so the SQL
// never asks a parameter's type.
//
// ended_at ranks last, the earliest first: of two ended snapshots alike
// in all else, one with the provider's end time (at or before the
// snapshot's time) beats one that falls back to the snapshot's time.
func ranksBelow(f Subscription, end any) string {
	fields := rankFields(rankValues{ended: "$10", updatedAt: "$7", rank: "$11", periodEnd: "$6", plan: "$4",
		customer: "$3", endedAt: "$9"})
	fields[1].null = f.UpdatedAt.IsZero()
	fields[3].null = f.CurrentPeriodEnd.IsZero()
	fields[6].null = end == nil
	return rankedBelow(fields)
}

// rankField is one value of a subscription snapshot's rank: the stored
// row's column and the snapshot's value, an SQL expression.
type rankField struct {
	col, param string
	null       bool // the value is NULL
	maybeNull  bool // the value may be NULL (a batch's column)
	nullable   bool // the column may be NULL
	earliest   bool // the smaller value ranks higher
}

// rankValues are a snapshot's values in SQL: ended (1 or 0), provider
// time, status rank, current period end, plan, customer, ended_at.
type rankValues struct{ ended, updatedAt, rank, periodEnd, plan, customer, endedAt string }

// rankFields returns the fields of a snapshot's rank in the order they
// are compared, with the snapshot's values v.
func rankFields(v rankValues) []rankField {
	return []rankField{
		{col: `CASE WHEN status = 'ended' THEN 1 ELSE 0 END`, param: v.ended},
		{col: "provider_updated_at", param: v.updatedAt, nullable: true},
		{col: statusRankSQL(), param: v.rank},
		{col: "current_period_end", param: v.periodEnd, nullable: true},
		{col: "plan", param: v.plan},
		{col: "customer", param: v.customer},
		{col: "ended_at", param: v.endedAt, earliest: true},
	}
}

// rankedBelow is the condition "the stored row ranks below the snapshot"
// over fields, compared in their order.
func rankedBelow(fields []rankField) string {
	lt := func(f rankField) string {
		switch {
		case f.null:
			return "FALSE"
		case f.earliest:
			// The column is NULL only where the value is too (neither
			// ended: else the first field decides); a batch's NULL value
			// makes this NULL, which the ANDs and ORs take as false.
			return fmt.Sprintf("(%s) > %s", f.col, f.param)
		case f.nullable && f.maybeNull:
			return fmt.Sprintf("(%[2]s IS NOT NULL AND (%[1]s IS NULL OR %[1]s < %[2]s))", f.col, f.param)
		case f.nullable:
			return fmt.Sprintf("(%[1]s IS NULL OR %[1]s < %[2]s)", f.col, f.param)
		}
		return fmt.Sprintf("(%s) < %s", f.col, f.param)
	}
	eq := func(f rankField) string {
		switch {
		case f.null:
			return fmt.Sprintf("%s IS NULL", f.col)
		case f.maybeNull:
			return fmt.Sprintf("%s IS NOT DISTINCT FROM %s", f.col, f.param)
		}
		return fmt.Sprintf("(%s) = %s", f.col, f.param)
	}
	// lt1 OR (eq1 AND (lt2 OR (eq2 AND (...))))
	cond := lt(fields[len(fields)-1])
	for i := len(fields) - 2; i >= 0; i-- {
		cond = fmt.Sprintf("(%s OR (%s AND %s))", lt(fields[i]), eq(fields[i]), cond)
	}
	return cond
}

func (a *applier) subscription(ctx context.Context, f Subscription) error {
	endedTime := endedAt(f, a.tx.now)
	ended, end := 0, a.t(endedTime) // end is nil when not ended
	if f.Status == "ended" {
		ended = 1
	}
	data := subscriptionFact(f, endedTime)
	args := []any{a.source, f.Ref, f.Customer, f.Plan, f.Status, a.t(f.CurrentPeriodEnd), a.t(f.UpdatedAt),
		a.t(a.tx.now), end, ended, statusRank(f.Status)}
	var id int64
	err := a.tx.QueryRowContext(ctx, `INSERT INTO payhook_subscriptions
		(source, ref, customer, plan, status, current_period_end, provider_updated_at, ended_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $9, $8, $8)
		ON CONFLICT (source, ref) DO NOTHING
		RETURNING id`, args[:9]...).Scan(&id)
	switch {
	case err == nil:
		if err := a.emit(ctx, outbox.SubscriptionCreated, f.Ref, f.Ref, f.UpdatedAt, data); err != nil {
			return err
		}
		if ended == 1 {
			a.out.EndedClaimed = append(a.out.EndedClaimed, f.Ref)
			return a.emit(ctx, outbox.SubscriptionEnded, f.Ref, f.Ref, endedTime, data)
		}
		return nil
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("insert subscription %s: %w", f.Ref, err)
	}
	// Only a snapshot that ranks higher replaces the stored one, status and
	// ended_at together; the first ended one claims the end.
	update := `UPDATE payhook_subscriptions
		SET customer = $3, plan = $4, status = $5, current_period_end = $6, provider_updated_at = $7,
			ended_at = $9, updated_at = $8
		WHERE source = $1 AND ref = $2 AND ` + ranksBelow(f, end)
	if ended == 1 {
		res, err := a.tx.ExecContext(ctx, update+` AND ended_at IS NULL`, args...)
		if err != nil {
			return fmt.Errorf("claim the end of subscription %s: %w", f.Ref, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("claim the end of subscription %s: %w", f.Ref, err)
		} else if n == 1 {
			a.out.EndedClaimed = append(a.out.EndedClaimed, f.Ref)
			return a.emit(ctx, outbox.SubscriptionEnded, f.Ref, f.Ref, endedTime, data)
		}
	}
	res, err := a.tx.ExecContext(ctx, update, args...)
	if err != nil {
		return fmt.Errorf("update subscription %s: %w", f.Ref, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update subscription %s: %w", f.Ref, err)
	} else if n == 1 {
		return a.emit(ctx, outbox.SubscriptionUpdated, f.Ref, snapshotKey(f, endedTime), f.UpdatedAt, data)
	}
	return nil
}

// snapshot is a Subscription ApplyMany applies with others, of the event
// at index i; endedAt is the end it claims when ended (see endedAt).
type snapshot struct {
	i       int
	sub     Subscription
	endedAt time.Time
}

// isSnapshot returns the subscription of facts when they are one snapshot
// of a subscription (what a mapping makes of a subscription created,
// renewed or ended) that passes Check.
func isSnapshot(facts []Fact) (Subscription, bool) {
	if len(facts) != 1 {
		return Subscription{}, false
	}
	f, ok := value(facts[0]).(Subscription)
	return f, ok && Check(f) == nil
}

// endedAt is the end snapshot f claims when ended: the provider's end
// time, else the snapshot's time, else now; zero when f is not ended.
func endedAt(f Subscription, now time.Time) time.Time {
	switch {
	case f.Status != "ended":
		return time.Time{}
	case !f.EndedAt.IsZero():
		return f.EndedAt
	case !f.UpdatedAt.IsZero():
		return f.UpdatedAt
	}
	return now
}

// snapshots applies together, as applier.subscription would, the events
// none of whose facts was applied yet (done) that are a snapshot alone
// (isSnapshot) of a subscription no event before them names (first), and
// counts their fact done: one statement inserts those not stored yet, one
// claims the end of the stored ones not ended that ended snapshots rank
// above, one replaces the other stored ones they rank above, and one
// writes their facts, instead of three statements each. A renewal wave,
// or a wave of subscriptions ending, is such a batch.
func snapshots(ctx context.Context, tx *Tx, as []*applier, events []Facts, first []bool, done []int) error {
	var ss []snapshot
	var rows [][]any
	for i, ev := range events {
		if f, ok := isSnapshot(ev.Facts); ok && first[i] && done[i] == 0 {
			s := snapshot{i: i, sub: f, endedAt: endedAt(f, tx.now)}
			ended := 0
			if f.Status == "ended" {
				ended = 1
			}
			ss = append(ss, s)
			rows = append(rows, []any{as[i].source, f.Ref, f.Customer, f.Plan, f.Status, tx.timeValue(f.CurrentPeriodEnd),
				tx.timeValue(f.UpdatedAt), statusRank(f.Status), ended, tx.timeValue(s.endedAt)})
		}
	}
	if len(ss) < 2 {
		return nil
	}
	db, now := tx.db, []any{tx.timeValue(tx.now)}
	created := map[[2]string]bool{}
	err := store.QueryRows(ctx, tx, rows, `INSERT INTO payhook_subscriptions
			(source, ref, customer, plan, status, current_period_end, provider_updated_at, ended_at, created_at, updated_at)
		SELECT j.value->>0, j.value->>1, j.value->>2, j.value->>3, j.value->>4, `+db.TimeColumn("j.value->>5")+`,
			`+db.TimeColumn("j.value->>6")+`, `+db.TimeColumn("j.value->>9")+`, $2, $2
		FROM `+db.JSONRows()+`
		WHERE TRUE
		ORDER BY j.n
		ON CONFLICT (source, ref) DO NOTHING
		RETURNING source, ref`, now, keysInto(created))
	if err != nil {
		return fmt.Errorf("insert %d subscriptions: %w", len(ss), err)
	}
	// Only a snapshot that ranks higher replaces the stored one, status
	// and ended_at together; the first ended one claims the end.
	fields := rankFields(rankValues{ended: "CAST(j.value->>8 AS INTEGER)", updatedAt: db.TimeColumn("j.value->>6"),
		rank: "CAST(j.value->>7 AS INTEGER)", periodEnd: db.TimeColumn("j.value->>5"), plan: "j.value->>3",
		customer: "j.value->>2", endedAt: db.TimeColumn("j.value->>9")})
	fields[1].maybeNull, fields[3].maybeNull = true, true
	update := func(rows [][]any, also string, into map[[2]string]bool) error {
		if len(rows) == 0 {
			return nil
		}
		return store.QueryRows(ctx, tx, rows, `UPDATE payhook_subscriptions
			SET customer = j.value->>2, plan = j.value->>3, status = j.value->>4,
				current_period_end = `+db.TimeColumn("j.value->>5")+`, provider_updated_at = `+db.TimeColumn("j.value->>6")+`,
				ended_at = `+db.TimeColumn("j.value->>9")+`, updated_at = $2
			FROM `+db.JSONRows()+`
			WHERE source = j.value->>0 AND ref = j.value->>1 AND `+rankedBelow(fields)+also+`
			RETURNING source, ref`, now, keysInto(into))
	}
	key := func(s snapshot) [2]string { return [2]string{as[s.i].source, s.sub.Ref} }
	var ends, rest [][]any
	for k, s := range ss {
		if !created[key(s)] && s.sub.Status == "ended" {
			ends = append(ends, rows[k])
		}
	}
	claimed, updated := map[[2]string]bool{}, map[[2]string]bool{}
	if err := update(ends, ` AND ended_at IS NULL`, claimed); err != nil {
		return fmt.Errorf("claim the end of subscriptions: %w", err)
	}
	for k, s := range ss {
		if !created[key(s)] && !claimed[key(s)] {
			rest = append(rest, rows[k])
		}
	}
	if err := update(rest, "", updated); err != nil {
		return fmt.Errorf("update subscriptions: %w", err)
	}
	var facts []outbox.Fact
	var outs []*Outcome
	emit := func(a *applier, typ, key string, at time.Time, data subscriptionData) error {
		fact, err := tx.fact(typ, a.source, data.Subscription, key, at, data)
		facts, outs = append(facts, fact), append(outs, a.out)
		return err
	}
	for _, s := range ss {
		done[s.i] = 1
		a, f := as[s.i], s.sub
		data := subscriptionFact(f, s.endedAt)
		var err error
		switch k := key(s); {
		case created[k]:
			err = emit(a, outbox.SubscriptionCreated, f.Ref, f.UpdatedAt, data)
			if err == nil && f.Status == "ended" {
				a.out.EndedClaimed = append(a.out.EndedClaimed, f.Ref)
				err = emit(a, outbox.SubscriptionEnded, f.Ref, s.endedAt, data)
			}
		case claimed[k]:
			a.out.EndedClaimed = append(a.out.EndedClaimed, f.Ref)
			err = emit(a, outbox.SubscriptionEnded, f.Ref, s.endedAt, data)
		case updated[k]:
			err = emit(a, outbox.SubscriptionUpdated, snapshotKey(f, s.endedAt), f.UpdatedAt, data)
		}
		if err != nil {
			return err
		}
	}
	emitted, err := outbox.EmitMany(ctx, tx.db, tx.Tx, tx.box, facts, tx.now)
	if err != nil {
		return err
	}
	for k, e := range emitted {
		tx.record(outs[k], facts[k], e)
	}
	return nil
}

// SubscriptionView is one subscription.
type SubscriptionView struct {
	Source           string    `json:"source"`
	Ref              string    `json:"ref"`
	Customer         string    `json:"customer"`
	Plan             string    `json:"plan"`
	Status           string    `json:"status"`
	CurrentPeriodEnd time.Time `json:"current_period_end,omitzero"`
	// ProviderUpdatedAt is the provider's time of the snapshot shown.
	ProviderUpdatedAt time.Time `json:"provider_updated_at,omitzero"`
	// EndedAt is when the provider says the subscription ended (else the
	// provider time of the snapshot that ended it); zero while not ended.
	EndedAt   time.Time `json:"ended_at,omitzero"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

const subscriptionColumns = `source, ref, customer, plan, status, current_period_end, provider_updated_at,
	ended_at, created_at, updated_at`

func scanSubscription(row scanner) (SubscriptionView, error) {
	var v SubscriptionView
	err := row.Scan(&v.Source, &v.Ref, &v.Customer, &v.Plan, &v.Status, store.ScanTime(&v.CurrentPeriodEnd),
		store.ScanTime(&v.ProviderUpdatedAt), store.ScanTime(&v.EndedAt), store.ScanTime(&v.CreatedAt),
		store.ScanTime(&v.UpdatedAt))
	return v, err
}

// GetSubscription returns the subscription of source with the provider
// reference ref, or an error wrapping payhook.ErrNotFound.
func GetSubscription(ctx context.Context, db *store.DB, source, ref string) (*SubscriptionView, error) {
	v, err := scanSubscription(db.SQL.QueryRowContext(ctx, `SELECT `+subscriptionColumns+` FROM payhook_subscriptions
		WHERE source = $1 AND ref = $2`, source, ref))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("subscription %s of %s: %w", ref, source, payhook.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get subscription %s of %s: %w", ref, source, err)
	}
	return &v, nil
}

// SubscriptionFilter selects subscriptions for ListSubscriptions. Zero
// fields match everything.
type SubscriptionFilter struct {
	Source   string
	Status   string
	Customer string
	// CreatedFrom, if set, keeps the subscriptions payhook created at or
	// after it.
	CreatedFrom time.Time
	// Limit caps the result; 0 means 100.
	Limit int
}

// ListSubscriptions returns matching subscriptions, newest first.
func ListSubscriptions(ctx context.Context, db *store.DB, f SubscriptionFilter) ([]SubscriptionView, error) {
	var q query
	if f.Source != "" {
		q.where("source = $%d", f.Source)
	}
	if f.Status != "" {
		q.where("status = $%d", f.Status)
	}
	if f.Customer != "" {
		q.where("customer = $%d", f.Customer)
	}
	if !f.CreatedFrom.IsZero() {
		q.where("created_at >= $%d", db.TimeValue(f.CreatedFrom))
	}
	return list(ctx, db, "list subscriptions", scanSubscription,
		`SELECT `+subscriptionColumns+` FROM payhook_subscriptions`+q.sql("id DESC", f.Limit), q.args...)
}

// LookupSubscription returns the subscription with the provider reference
// ref; source empty as for LookupPayment.
func LookupSubscription(ctx context.Context, db *store.DB, source, ref string) (*SubscriptionView, error) {
	if source == "" {
		s, err := onlySource(ctx, db, "subscription", "payhook_subscriptions", "ref", ref)
		if err != nil {
			return nil, err
		}
		source = s
	}
	return GetSubscription(ctx, db, source, ref)
}
