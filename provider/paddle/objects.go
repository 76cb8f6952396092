package paddle

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/apiget"
	"github.com/payhook/payhook/provider/adapter"
)

var _ adapter.ObjectLister = (*Client)(nil)

// VersionHeader is the header in which a request pins Paddle's API
// version (Paddle numbers them: "1"). Paddle's answers do not say theirs;
// when one does (the simulator's), the listed objects carry it.
const VersionHeader = "Paddle-Version"

// objectList is one of Paddle's lists that reconciliation reads.
type objectList struct {
	path string
	// action filters adjustments by their action.
	action string
	// perPage is the most Paddle lists per page.
	perPage int
	// newestFirst: the list has no time filter, so it is asked newest
	// first (order_by=id[DESC]: Paddle's ids begin with their creation
	// time) and read until an object older than ObjectQuery.From.
	newestFirst bool
}

// objectLists are Paddle's list routes by object kind: refunds and
// chargebacks are both adjustments, told apart by their action.
var objectLists = map[string]objectList{
	adapter.KindPayment:      {path: "transactions", perPage: 30},
	adapter.KindRefund:       {path: "adjustments", action: "refund", perPage: 50, newestFirst: true},
	adapter.KindDispute:      {path: "adjustments", action: "chargeback", perPage: 50, newestFirst: true},
	adapter.KindSubscription: {path: "subscriptions", perPage: 200, newestFirst: true},
}

// listed is the part of a listed transaction, adjustment or subscription
// that reconciliation reads.
type listed struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	CreatedAt    string `json:"created_at"`
	CurrencyCode string `json:"currency_code"`
	PaymentID    string `json:"payment_id"` // the simulator's: its payment behind a transaction
	Details      *struct {
		Totals *totals `json:"totals"`
	} `json:"details"`
	Action        string  `json:"action"`
	TransactionID string  `json:"transaction_id"`
	RefundID      string  `json:"refund_id"` // the simulator's: its refund behind an adjustment
	Totals        *totals `json:"totals"`
	Items         []struct {
		Price *struct {
			ID string `json:"id"`
		} `json:"price"`
	} `json:"items"`
	ScheduledChange *struct {
		Action string `json:"action"`
	} `json:"scheduled_change"`
}

// totals are a transaction's details.totals or an adjustment's totals:
// amounts as strings of minor units.
type totals struct {
	Total        *string `json:"total"`
	GrandTotal   *string `json:"grand_total"`
	Credit       *string `json:"credit"`
	CurrencyCode string  `json:"currency_code"`
}

// ListObjects returns one page of GET /transactions (created_at[GTE]
// q.From), /adjustments (action=refund or action=chargeback) or
// /subscriptions, after q.Cursor, per_page q.Limit (default and at most
// Paddle's most: 30 transactions, 50 adjustments, 200 subscriptions),
// with the pinned Paddle-Version if any. Adjustments and subscriptions,
// which Paddle cannot filter by time, are listed newest first
// (order_by=id[DESC]) and only until one created before q.From: that page
// is the last, and that item and those after it are read no further than
// their id and created_at (one malformed beyond the window fails
// nothing). Next is the after of meta.pagination.next when has_more.
// Transactions not paid or completed (draft, ready, billed, canceled,
// past_due), adjustments of another action and chargebacks pending
// approval or rejected, which move no money, are left out of Objects.
// Errors are adapter.ObjectLister's.
func (c *Client) ListObjects(ctx context.Context, q adapter.ObjectQuery) (adapter.ObjectPage, error) {
	l, ok := objectLists[q.Kind]
	if !ok {
		return adapter.ObjectPage{}, nil
	}
	limit := q.Limit
	if limit <= 0 || limit > l.perPage {
		limit = l.perPage
	}
	v := url.Values{"per_page": {strconv.Itoa(limit)}}
	if l.action != "" {
		v.Set("action", l.action)
	}
	if l.newestFirst {
		v.Set("order_by", "id[DESC]")
	} else if !q.From.IsZero() {
		v.Set("created_at[GTE]", q.From.UTC().Format(time.RFC3339Nano))
	}
	if q.Cursor != "" {
		v.Set("after", q.Cursor)
	}
	page, err := c.list(ctx, l.path, v)
	if err != nil {
		return adapter.ObjectPage{}, err
	}
	p := adapter.ObjectPage{Next: page.next}
	for _, raw := range page.items {
		// The window first, on the id and created_at alone: an item
		// older than the window is not read further, so one malformed
		// beyond it fails nothing.
		var head struct {
			ID        string `json:"id"`
			CreatedAt string `json:"created_at"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return adapter.ObjectPage{}, fmt.Errorf("paddle: list %s: an item is not a Paddle entity (%.100q): %w", l.path, raw, payhook.ErrMalformed)
		}
		created, err := time.Parse(time.RFC3339Nano, head.CreatedAt)
		if head.ID == "" || err != nil {
			return adapter.ObjectPage{}, fmt.Errorf("paddle: list %s: a listed %s without an id or created_at (%q, %q): %w", l.path, q.Kind, head.ID, head.CreatedAt, payhook.ErrMalformed)
		}
		if created.Before(q.From) {
			if l.newestFirst {
				// Everything further is older still.
				p.Next = ""
				break
			}
			continue
		}
		var it listed
		if err := json.Unmarshal(raw, &it); err != nil {
			return adapter.ObjectPage{}, fmt.Errorf("paddle: list %s: an item is not a Paddle entity (%.100q): %w", l.path, raw, payhook.ErrMalformed)
		}
		o, keep, err := it.object(q.Kind, page.version)
		if err != nil {
			return adapter.ObjectPage{}, fmt.Errorf("paddle: list %s: %w", l.path, err)
		}
		if keep {
			p.Objects = append(p.Objects, o)
		}
	}
	return p, nil
}

// listPage is one page of a Paddle list: its items, whether more follow
// and the after of its next page.
type listPage struct {
	items   []json.RawMessage
	next    string
	version string
}

// list GETs one page of a Paddle list ({"data":[...],"meta":{"pagination":
// {"next","has_more"}}}) with the pinned version. next is the after of
// meta.pagination.next when has_more ("" otherwise: Paddle sets next on
// the last page too). A page that is not a Paddle list, or says more
// follow but lists nothing or gives no cursor, is malformed.
func (c *Client) list(ctx context.Context, path string, v url.Values) (listPage, error) {
	b, got, err := apiget.ListWith(ctx, c.HTTP, c.BaseURL, c.Key, path, v, c.versionHeader())
	if err != nil {
		return listPage{}, fmt.Errorf("paddle: list %s: %w", path, err)
	}
	var list struct {
		Data []json.RawMessage `json:"data"`
		Meta struct {
			Pagination struct {
				Next    string `json:"next"`
				HasMore bool   `json:"has_more"`
			} `json:"pagination"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(b, &list); err != nil || list.Data == nil {
		return listPage{}, fmt.Errorf("paddle: list %s: the answer is not a Paddle list (%.100q): %w", path, b, payhook.ErrMalformed)
	}
	p := listPage{items: list.Data, version: got.Get(VersionHeader)}
	if !list.Meta.Pagination.HasMore {
		return p, nil
	}
	if len(list.Data) == 0 {
		return listPage{}, fmt.Errorf("paddle: list %s: a page that says more follow lists nothing (next %q): %w", path, list.Meta.Pagination.Next, payhook.ErrMalformed)
	}
	u, err := url.Parse(list.Meta.Pagination.Next)
	if err == nil {
		p.next = u.Query().Get("after")
	}
	if p.next == "" {
		return listPage{}, fmt.Errorf("paddle: list %s: a page that says more follow gives no after in meta.pagination.next %q: %w", path, list.Meta.Pagination.Next, payhook.ErrMalformed)
	}
	return p, nil
}

// versionHeader pins the client's API version, if any.
func (c *Client) versionHeader() http.Header {
	if c.APIVersion == "" {
		return nil
	}
	return http.Header{VersionHeader: {c.APIVersion}}
}

// amount reads an amount of minor units written as a string of digits,
// as Paddle writes them (no sign, no decimals); a missing one is 0.
func amount(what string, s *string) (int64, error) {
	if s == nil || *s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(*s, 10, 64)
	if err != nil || n < 0 || strings.HasPrefix(*s, "+") {
		return 0, fmt.Errorf("%s is %q, not an amount of minor units: %w", what, *s, payhook.ErrMalformed)
	}
	if err := payhook.CheckAmount(what, n); err != nil {
		return 0, err
	}
	return n, nil
}

// object normalizes a listed entity into payhook's vocabulary, as
// payhook's Paddle mapping reads the same entity in an event, and says
// whether reconciliation keeps it.
func (it listed) object(kind, version string) (adapter.Object, bool, error) {
	created, err := time.Parse(time.RFC3339Nano, it.CreatedAt)
	if it.ID == "" || err != nil {
		return adapter.Object{}, false, fmt.Errorf("a listed %s without an id or created_at (%q, %q): %w", kind, it.ID, it.CreatedAt, payhook.ErrMalformed)
	}
	o := adapter.Object{Kind: kind, Ref: it.ID, Currency: strings.ToUpper(it.CurrencyCode), Created: created.UTC(), APIVersion: version}
	switch kind {
	case adapter.KindPayment:
		return it.transaction(o)
	case adapter.KindRefund, adapter.KindDispute:
		return it.adjustment(o)
	}
	o.Currency = ""
	if len(it.Items) > 0 && it.Items[0].Price != nil {
		o.Plan = it.Items[0].Price.ID
	}
	o.Status = subscriptionStatus(it)
	return o, true, nil
}

// transaction is a paid or completed transaction: a payment of what the
// customer paid (details.totals.grand_total: the total less the credit
// Paddle applied from the customer's balance; total less credit when
// there is no grand_total), succeeded. Paddle's transactions do not say
// what was refunded (RefundedAmount -1): reconciliation adds up the
// refunds and sets the status by them.
func (it listed) transaction(o adapter.Object) (adapter.Object, bool, error) {
	if it.Status != "paid" && it.Status != "completed" {
		return o, false, nil
	}
	if it.PaymentID != "" {
		o.Ref = it.PaymentID
	}
	if it.Details == nil || it.Details.Totals == nil {
		return o, false, fmt.Errorf("transaction %s has no details.totals: %w", it.ID, payhook.ErrMalformed)
	}
	t := it.Details.Totals
	if o.Currency == "" {
		o.Currency = strings.ToUpper(t.CurrencyCode)
	}
	var err error
	if t.GrandTotal != nil {
		o.Amount, err = amount("transaction "+it.ID+" details.totals.grand_total", t.GrandTotal)
	} else {
		var total, credit int64
		total, err = amount("transaction "+it.ID+" details.totals.total", t.Total)
		if err == nil {
			credit, err = amount("transaction "+it.ID+" details.totals.credit", t.Credit)
		}
		if err == nil && credit > total {
			err = fmt.Errorf("transaction %s: details.totals.credit %d is above its total %d: %w", it.ID, credit, total, payhook.ErrMalformed)
		}
		o.Amount = total - credit
	}
	if err != nil {
		return o, false, err
	}
	o.Status, o.RefundedAmount = "succeeded", -1
	return o, true, nil
}

// adjustment is a refund (approved: succeeded, rejected or reversed:
// failed) or a chargeback (approved: lost, reversed: won) of the
// transaction it names. The simulator's refunds are named by refund_id.
func (it listed) adjustment(o adapter.Object) (adapter.Object, bool, error) {
	want := map[string]string{adapter.KindRefund: "refund", adapter.KindDispute: "chargeback"}[o.Kind]
	if it.Action != want {
		return o, false, nil
	}
	if it.TransactionID == "" {
		return o, false, fmt.Errorf("adjustment %s names no transaction_id: %w", it.ID, payhook.ErrMalformed)
	}
	o.PaymentRef = it.TransactionID
	if it.Totals != nil {
		var err error
		if o.Amount, err = amount("adjustment "+it.ID+" totals.total", it.Totals.Total); err != nil {
			return o, false, err
		}
		if o.Currency == "" {
			o.Currency = strings.ToUpper(it.Totals.CurrencyCode)
		}
	}
	if o.Kind == adapter.KindRefund {
		if it.RefundID != "" {
			o.Ref = it.RefundID
		}
		switch it.Status {
		case "approved":
			o.Status = "succeeded"
		case "pending_approval":
			o.Status = "pending"
		case "rejected", "reversed":
			o.Status = "failed"
		default:
			return o, false, fmt.Errorf("refund adjustment %s has status %q: %w", it.ID, it.Status, payhook.ErrMalformed)
		}
		return o, true, nil
	}
	switch it.Status {
	case "approved":
		o.Status = "lost"
	case "reversed":
		o.Status = "won"
	case "pending_approval", "rejected":
		return o, false, nil
	default:
		return o, false, fmt.Errorf("chargeback adjustment %s has status %q: %w", it.ID, it.Status, payhook.ErrMalformed)
	}
	return o, true, nil
}

// subscriptionStatus maps a Paddle subscription's status as payhook's
// Paddle mapping does: past_due and paused kept (not paid for), a
// scheduled cancel is canceled, canceled is ended, trialing is active.
func subscriptionStatus(it listed) string {
	switch {
	case it.Status == "past_due" || it.Status == "paused":
		return it.Status
	case it.ScheduledChange != nil && it.ScheduledChange.Action == "cancel":
		return "canceled"
	case it.Status == "canceled":
		return "ended"
	case it.Status == "trialing":
		return "active"
	}
	return it.Status
}
