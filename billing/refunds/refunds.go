// Package refunds asks providers for refunds with stable idempotency
// keys: what payhook payments refund runs.
//
// A refund request is stored (payhook_refund_requests) before the
// provider is called, with its key refund-<source>-<payment>-<seq>, seq
// numbering the refunds of the payment from 1 (refund-<digest>-<seq>
// when the source or the payment has a dash, or the key would pass 255
// bytes: requestKey). The call sends that key
// as the Idempotency-Key, so that the provider refunds once however many
// times the request is sent: running the command twice, or again after a
// crash between the provider's answer and payhook recording it, re-sends
// the same key.
//
// When a run is the same as an earlier one:
//   - a pending request (stored, maybe sent, its answer not recorded) of
//     the payment is re-sent with its key when the run asks the same
//     amount, or gives no amount; another amount is refused until it is
//     finished; one stored KeyLifetime ago or more is refused (its key
//     may be forgotten at the provider) until Abandon gives it up;
//   - a completed request of the same amount is refused unless Again is
//     set: then the payment's next seq (a new key) refunds again;
//   - a failed request (the provider refused it) is not reused: the next
//     run makes a new one.
//
// Refunding more than the payment keeps (its amount less what its
// refunds took: billing's refunded amount, plus payhook's completed
// requests whose refunds billing has not posted yet, their webhooks not
// arrived; less what its chargebacks not won took back) is refused
// before any call, and so is any refund of a crypto
// payment (final once settled, never credited when rejected). The
// request only records the call: the payment's refunded amount changes
// when the refund's webhook arrives, through the normal path.
package refunds

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/apiget"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/store"
)

// The statuses of a request.
const (
	StatusPending   = "pending"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
)

// Request is one stored refund request.
type Request struct {
	Source   string `json:"source"`
	Payment  string `json:"payment"`
	Seq      int    `json:"seq"`
	Key      string `json:"idempotency_key"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Reason   string `json:"reason,omitempty"`
	// Status is pending, completed or failed.
	Status string `json:"status"`
	// ProviderRef is the provider's refund, once completed.
	ProviderRef string `json:"provider_ref,omitempty"`
	// Error says why the provider refused a failed request, or why the
	// last send of a pending one failed.
	Error string `json:"error,omitempty"`
	// Attempts counts the sends.
	Attempts  int       `json:"attempts"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Reused says that this run re-sent an earlier pending request.
	Reused bool `json:"reused"`
	// Replayed says that the provider answered with an earlier refund of
	// the same key (when it says so).
	Replayed bool `json:"replayed,omitempty"`
}

// Ask is what a run asks for.
type Ask struct {
	// Source and Payment name the payment; Source "" when the payment ref
	// is in one source only.
	Source, Payment string
	// Amount in minor units; 0 refunds all that the payment keeps.
	Amount int64
	// Reason, if set, is passed on to the provider.
	Reason string
	// Again refunds again a payment whose refund of the same amount
	// completed.
	Again bool
	// Abandon marks the payment's pending request failed, abandoned,
	// instead of sending it again, then refunds with a new request: for a
	// request pending past KeyLifetime, once the operator has checked
	// at the provider that it refunded nothing. A request pending less
	// long is refused: sent again with its key, it refunds at most once.
	Abandon bool
}

// KeyLifetime is how long after a request was stored its idempotency key
// is trusted to still name it at the provider: Stripe forgets a key once
// it is 24 hours old, and a key sent again after that makes a new refund.
// A request pending longer is not sent again (see Prepare).
const KeyLifetime = 23 * time.Hour

// Config is how Refund runs.
type Config struct {
	// DB holds the requests and billing's payments (required).
	DB *store.DB
	// Refunder calls the provider (required).
	Refunder adapter.Refunder
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Record, if set, replaces the step that records the provider's
	// answer (Complete): tests make it fail as a crash would.
	Record func(ctx context.Context, db *store.DB, r *Request, res adapter.RefundResult, at time.Time) error
}

// Refund prepares the request a asks for (Prepare), sends it and records
// the answer. It returns the request even with an error when one was
// stored: a pending request with an error is to be run again, which
// re-sends its key. Errors wrap payhook.ErrInvalid (nothing to refund, an
// over-refund, a conflicting pending request, a provider refusing),
// payhook.ErrNotFound (no such payment) or payhook.ErrConflict-like
// ambiguity from billing; others are worth running again.
func Refund(ctx context.Context, cfg Config, a Ask) (*Request, error) {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	r, err := Prepare(ctx, cfg.DB, a, now())
	if err != nil {
		return nil, err
	}
	// Counted only while it is pending: a request another run abandoned
	// (Ask.Abandon) or finished meanwhile is not sent (see abandon).
	res0, err := cfg.DB.SQL.ExecContext(ctx, `UPDATE payhook_refund_requests SET attempts = attempts + 1, updated_at = $1
		WHERE idem_key = $2 AND status = 'pending'`, now().UTC().Format(time.RFC3339Nano), r.Key)
	if err != nil {
		return r, fmt.Errorf("refund %s of %s: count the attempt: %w", r.Payment, r.Source, err)
	}
	if n, err := res0.RowsAffected(); err != nil || n != 1 {
		return nil, fmt.Errorf("refund %s of %s: request %d is no longer pending (another run finished or abandoned it); run again: %w",
			r.Payment, r.Source, r.Seq, payhook.ErrLocked)
	}
	r.Attempts++
	res, err := cfg.Refunder.Refund(ctx, adapter.RefundRequest{Payment: r.Payment, Amount: r.Amount, Reason: r.Reason, Key: r.Key})
	if err != nil {
		var api *apiget.APIError
		if errors.As(err, &api) && api.Status >= 400 && api.Status < 500 &&
			api.Status != 409 && api.Status != 429 && api.Status != 401 && api.Status != 403 {
			// The provider refused the refund itself: nothing was refunded.
			if ferr := fail(ctx, cfg.DB, r, err.Error(), now()); ferr != nil {
				return r, errors.Join(err, ferr)
			}
			return r, fmt.Errorf("refund %s of %s: the provider refused it: %w: %w", r.Payment, r.Source, payhook.ErrInvalid, err)
		}
		note(ctx, cfg.DB, r, err.Error(), now())
		return r, fmt.Errorf("refund %s of %s (request %d, key %s, still pending: run it again to re-send the same key): %w",
			r.Payment, r.Source, r.Seq, r.Key, err)
	}
	record := cfg.Record
	if record == nil {
		record = Complete
	}
	if err := record(ctx, cfg.DB, r, res, now()); errors.Is(err, payhook.ErrConflict) {
		// Recorded, after another run gave the request up (see Complete).
		return r, err
	} else if err != nil {
		return r, fmt.Errorf("refund %s of %s: the provider answered refund %s but recording it failed (request %d stays pending; running it again re-sends key %s, which the provider answers with the same refund): %w",
			r.Payment, r.Source, res.Ref, r.Seq, r.Key, err)
	}
	r.Replayed = res.Replayed
	return r, nil
}

// Prepare returns the request to send for a, stored before the call: the
// payment's pending request, reused (see the package doc), or a new one
// with the payment's next seq. The unique indexes decide between
// concurrent runs: the loser gets an error and changes nothing.
func Prepare(ctx context.Context, db *store.DB, a Ask, at time.Time) (*Request, error) {
	if a.Amount < 0 {
		return nil, fmt.Errorf("refund %s: amount %d: want a positive amount of minor units: %w", a.Payment, a.Amount, payhook.ErrInvalid)
	}
	if err := payhook.CheckAmount("amount", a.Amount); err != nil {
		return nil, fmt.Errorf("refund %s: %w", a.Payment, err)
	}
	p, err := billing.LookupPayment(ctx, db, a.Source, a.Payment)
	if err != nil {
		return nil, fmt.Errorf("refund: %w", err)
	}
	if p.Kind != "fiat" {
		// Settled, it is final; rejected, it was never credited (its chain
		// reference credits another invoice). Either way nothing of it is
		// payhook's to give back, not even by a request stored before.
		return nil, fmt.Errorf("refund %s of %s: a %s payment (%s) is final, not refunded: %w",
			p.Ref, p.Source, p.Kind, p.Status, payhook.ErrInvalid)
	}
	reqs, err := List(ctx, db, p.Source, p.Ref)
	if err != nil {
		return nil, err
	}
	if r := lastPending(reqs); r != nil && a.Abandon {
		if age := at.Sub(r.CreatedAt); age < KeyLifetime {
			// Its key still names it at the provider: sent again, it
			// refunds at most once; given up, a new key could refund twice.
			return nil, fmt.Errorf("refund %s of %s: --abandon: request %d for %d %s has been pending only %s: its key is still "+
				"known to the provider, so run it again without --abandon (and with --amount %d or none) to finish it; "+
				"a request is given up only once pending %s: %w",
				p.Ref, p.Source, r.Seq, r.Amount, r.Currency, age.Round(time.Second), r.Amount, KeyLifetime, payhook.ErrInvalid)
		}
		if err := abandon(ctx, db, r, at); err != nil {
			return nil, err
		}
		if reqs, err = List(ctx, db, p.Source, p.Ref); err != nil {
			return nil, err
		}
	} else if r != nil {
		// Past the key's lifetime first: finishing the request with its
		// key, which the other refusal asks, is what must not be done.
		if age := at.Sub(r.CreatedAt); age >= KeyLifetime {
			return nil, fmt.Errorf("refund %s of %s: request %d for %d %s has been pending since %s (%s): its idempotency key %s "+
				"may be forgotten at the provider (Stripe keeps keys 24 hours), so sending it again could refund twice; "+
				"check at the provider whether the payment has a refund of %d %s from then: if it has, its webhook records it "+
				"and nothing more is to be done; if not, run again with --abandon to give the request up and refund with a new one: %w",
				p.Ref, p.Source, r.Seq, r.Amount, r.Currency, r.CreatedAt.Format(time.RFC3339), age.Round(time.Minute), r.Key,
				r.Amount, r.Currency, payhook.ErrInvalid)
		}
		if a.Amount != 0 && a.Amount != r.Amount {
			return nil, fmt.Errorf("refund %s of %s: request %d for %d %s is pending; run it again with --amount %d (or none) to finish it first: %w",
				p.Ref, p.Source, r.Seq, r.Amount, r.Currency, r.Amount, payhook.ErrInvalid)
		}
		r.Reused = true
		return r, nil
	} else if a.Abandon {
		return nil, fmt.Errorf("refund %s of %s: --abandon: no request of the payment is pending: %w", p.Ref, p.Source, payhook.ErrInvalid)
	}
	// What the payment keeps: billing's refunded amount, and what
	// payhook's completed requests took whose refunds billing has not
	// posted yet (their webhooks have not arrived): a refund made
	// elsewhere (the provider's dashboard) is in the first and not in the
	// second, so the larger of the two would count it in place of them.
	posted := make(map[string]bool, len(p.Postings))
	for _, post := range p.Postings {
		posted[post.FactKey] = true
	}
	taken := p.RefundedAmount
	for _, r := range reqs {
		if r.Status == StatusCompleted && (r.ProviderRef == "" || !posted["refund:"+r.ProviderRef]) {
			taken += r.Amount
		}
	}
	// What its open chargebacks took back too: the receivable the payment
	// keeps (the sum of its postings' movements, see billing.ApplyOutcome)
	// falls short of its amount less its refunds by that much. Refunding
	// it as well would pay the same money out twice.
	var kept int64
	for _, post := range p.Postings {
		kept += post.Amount
	}
	chargedBack := max(0, p.Amount-p.RefundedAmount-kept)
	left := p.Amount - taken - chargedBack
	amount := a.Amount
	if amount == 0 {
		amount = left
	}
	if left <= 0 {
		return nil, fmt.Errorf("refund %s of %s: nothing left to refund (amount %d %s, refunded %d, charged back %d): %w",
			p.Ref, p.Source, p.Amount, p.Currency, taken, chargedBack, payhook.ErrInvalid)
	}
	if amount > left {
		return nil, fmt.Errorf("refund %s of %s: %d is more than the %d %s the payment keeps (amount %d, refunded %d, charged back %d): %w",
			p.Ref, p.Source, amount, left, p.Currency, p.Amount, taken, chargedBack, payhook.ErrInvalid)
	}
	seq := 1
	if n := len(reqs); n > 0 {
		last := reqs[n-1]
		seq = last.Seq + 1
		if last.Status == StatusCompleted && last.Amount == amount && !a.Again {
			return nil, fmt.Errorf("refund %s of %s: request %d already refunded %d %s (%s); give --again to refund it again: %w",
				p.Ref, p.Source, last.Seq, last.Amount, last.Currency, last.ProviderRef, payhook.ErrInvalid)
		}
	}
	r := &Request{Source: p.Source, Payment: p.Ref, Seq: seq, Key: requestKey(p.Source, p.Ref, seq),
		Amount: amount, Currency: p.Currency, Reason: a.Reason, Status: StatusPending, CreatedAt: at.UTC(), UpdatedAt: at.UTC()}
	ts := at.UTC().Format(time.RFC3339Nano)
	var got int
	err = db.SQL.QueryRowContext(ctx, `INSERT INTO payhook_refund_requests
		(source, payment, seq, idem_key, amount, currency, reason, status, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $8) ON CONFLICT DO NOTHING RETURNING seq`,
		r.Source, r.Payment, r.Seq, r.Key, r.Amount, r.Currency, r.Reason, ts).Scan(&got)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("refund %s of %s: another run stored request %d at the same time; run it again: %w",
			r.Payment, r.Source, r.Seq, payhook.ErrLocked)
	case err != nil:
		return nil, fmt.Errorf("refund %s of %s: store request %d: %w", r.Payment, r.Source, r.Seq, err)
	}
	return r, nil
}

// requestKey is the idempotency key of the seq-th refund request of
// payment of source: refund-<source>-<payment>-<seq>, four parts between
// dashes, when neither name has a dash and the key fits maxKeyBytes;
// else refund-<digest>-<seq>, three parts, the digest a SHA-256 of the
// two names. So no two requests share a key: payment b-c of source a and
// payment c of source a-b would have read alike.
func requestKey(source, payment string, seq int) string {
	key := fmt.Sprintf("refund-%s-%s-%d", source, payment, seq)
	if strings.Contains(source, "-") || strings.Contains(payment, "-") || len(key) > maxKeyBytes {
		sum := sha256.Sum256([]byte(source + "\x00" + payment))
		key = fmt.Sprintf("refund-%x-%d", sum[:16], seq)
	}
	return key
}

// maxKeyBytes bounds an idempotency key: Stripe takes 255 characters.
const maxKeyBytes = 255

// Complete records that the provider accepted r with its refund res: a
// conditional UPDATE of the pending request, so recording twice changes
// nothing. A request given up meanwhile (Ask.Abandon by another run while
// this send was under way, or a failure recorded) refunded all the same:
// it is recorded completed, what the provider says it is, so that what
// it took counts, and Complete returns an error saying that the payment
// may have been refunded twice (the abandoning run's new key too).
func Complete(ctx context.Context, db *store.DB, r *Request, res adapter.RefundResult, at time.Time) error {
	ref, ts := payhook.Storable(res.Ref), at.UTC().Format(time.RFC3339Nano)
	done, err := db.SQL.ExecContext(ctx, `UPDATE payhook_refund_requests SET status = 'completed', provider_ref = $1,
		error = '', updated_at = $2 WHERE idem_key = $3 AND status = 'pending'`, ref, ts, r.Key)
	if err != nil {
		return fmt.Errorf("record refund %s of request %s: %w", res.Ref, r.Key, err)
	}
	if n, err := done.RowsAffected(); err != nil {
		return fmt.Errorf("record refund %s of request %s: %w", res.Ref, r.Key, err)
	} else if n == 0 {
		// Not pending: completed already (recorded twice), or failed.
		var was string
		late, err := db.SQL.ExecContext(ctx, `UPDATE payhook_refund_requests SET status = 'completed', provider_ref = $1,
			error = 'refunded after it was given up: ' || error, updated_at = $2 WHERE idem_key = $3 AND status = 'failed'`, ref, ts, r.Key)
		if err != nil {
			return fmt.Errorf("record refund %s of request %s: %w", res.Ref, r.Key, err)
		}
		if n, err := late.RowsAffected(); err != nil {
			return fmt.Errorf("record refund %s of request %s: %w", res.Ref, r.Key, err)
		} else if n == 1 {
			if err := db.SQL.QueryRowContext(ctx, `SELECT error FROM payhook_refund_requests WHERE idem_key = $1`, r.Key).Scan(&was); err != nil {
				was = err.Error()
			}
			r.Status, r.ProviderRef, r.Error = StatusCompleted, res.Ref, was
			return fmt.Errorf("refund %s of %s: the provider refunded request %d (key %s, refund %s) after it had been given up (%s): "+
				"it is recorded completed, but a request made since to replace it may have refunded the payment again; "+
				"check the payment's refunds at the provider: %w", r.Payment, r.Source, r.Seq, r.Key, res.Ref, was, payhook.ErrConflict)
		}
	}
	r.Status, r.ProviderRef, r.Error = StatusCompleted, res.Ref, ""
	return nil
}

// lastPending returns the last of reqs that is pending, nil if none is.
func lastPending(reqs []*Request) *Request {
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Status == StatusPending {
			return reqs[i]
		}
	}
	return nil
}

// sendWindow bounds how long a send of a request may still be under way
// after it began (its attempt counted): abandon waits that long after the
// last one.
const sendWindow = 10 * time.Minute

// abandon records that the operator gave pending request r up (Ask.Abandon):
// a conditional UPDATE of the request as read, still pending and with no
// attempt counted since, so that it never races a run sending it again
// (Refund counts its attempt only while the request is pending); and not
// within sendWindow of its last attempt, which may still be under way.
func abandon(ctx context.Context, db *store.DB, r *Request, at time.Time) error {
	if since := at.Sub(r.UpdatedAt); since < sendWindow {
		return fmt.Errorf("refund %s of %s: --abandon: request %d was last sent or noted %s ago and a send may still be under way; "+
			"run again once %s have passed: %w", r.Payment, r.Source, r.Seq, since.Round(time.Second), sendWindow, payhook.ErrLocked)
	}
	res, err := db.SQL.ExecContext(ctx, `UPDATE payhook_refund_requests SET status = 'failed', error = $1, updated_at = $2
		WHERE idem_key = $3 AND status = 'pending' AND attempts = $4`,
		"abandoned by the operator (--abandon) after "+at.Sub(r.CreatedAt).Round(time.Minute).String()+" pending",
		at.UTC().Format(time.RFC3339Nano), r.Key, r.Attempts)
	if err != nil {
		return fmt.Errorf("refund %s of %s: abandon request %d: %w", r.Payment, r.Source, r.Seq, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("refund %s of %s: abandon request %d: another run sent, finished or abandoned it meanwhile; run again: %w",
			r.Payment, r.Source, r.Seq, payhook.ErrLocked)
	}
	return nil
}

// fail records that the provider refused r.
func fail(ctx context.Context, db *store.DB, r *Request, cause string, at time.Time) error {
	cause = payhook.Storable(cause)
	if _, err := db.SQL.ExecContext(ctx, `UPDATE payhook_refund_requests SET status = 'failed', error = $1, updated_at = $2
		WHERE idem_key = $3 AND status = 'pending'`, cause, at.UTC().Format(time.RFC3339Nano), r.Key); err != nil {
		return fmt.Errorf("record the refusal of request %s: %w", r.Key, err)
	}
	r.Status, r.Error = StatusFailed, cause
	return nil
}

// note records why the last send of a pending request failed; best
// effort, the request stays pending either way.
func note(ctx context.Context, db *store.DB, r *Request, cause string, at time.Time) {
	cause = payhook.Storable(cause)
	db.SQL.ExecContext(ctx, `UPDATE payhook_refund_requests SET error = $1, updated_at = $2 WHERE idem_key = $3 AND status = 'pending'`,
		cause, at.UTC().Format(time.RFC3339Nano), r.Key)
	r.Error = cause
}

// List returns the refund requests of a payment, by seq.
func List(ctx context.Context, db *store.DB, source, payment string) ([]*Request, error) {
	rows, err := db.SQL.QueryContext(ctx, `SELECT source, payment, seq, idem_key, amount, currency, reason, status,
		provider_ref, error, attempts, created_at, updated_at FROM payhook_refund_requests
		WHERE source = $1 AND payment = $2 ORDER BY seq`, source, payment)
	if err != nil {
		return nil, fmt.Errorf("list refund requests of %s of %s: %w", payment, source, err)
	}
	defer rows.Close()
	var out []*Request
	for rows.Next() {
		var r Request
		if err := rows.Scan(&r.Source, &r.Payment, &r.Seq, &r.Key, &r.Amount, &r.Currency, &r.Reason, &r.Status,
			&r.ProviderRef, &r.Error, &r.Attempts, store.ScanTime(&r.CreatedAt), store.ScanTime(&r.UpdatedAt)); err != nil {
			return nil, fmt.Errorf("list refund requests of %s of %s: %w", payment, source, err)
		}
		out = append(out, &r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list refund requests of %s of %s: %w", payment, source, err)
	}
	return out, nil
}
