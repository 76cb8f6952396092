package stripe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/apiget"
	"github.com/payhook/payhook/internal/stripecapture"
	"github.com/payhook/payhook/provider/adapter"
)

var _ adapter.ObjectLister = (*Client)(nil)

// VersionHeader is the header in which a request pins Stripe's API
// version and an answer says the version it was rendered in.
const VersionHeader = "Stripe-Version"

// listPaths are Stripe's list routes by object kind.
var listPaths = map[string]string{
	adapter.KindPayment: "v1/charges", adapter.KindRefund: "v1/refunds",
	adapter.KindDispute: "v1/disputes", adapter.KindSubscription: "v1/subscriptions",
}

// listed is the part of a listed charge, refund, dispute or subscription
// that reconciliation reads.
type listed struct {
	ID             string `json:"id"`
	Amount         int64  `json:"amount"`
	AmountRefunded int64  `json:"amount_refunded"`
	AmountCaptured *int64 `json:"amount_captured"` // a charge's; nil in older versions and other objects
	Captured       *bool  `json:"captured"`        // a charge's
	Currency       string `json:"currency"`
	Status         string `json:"status"`
	PaymentIntent  any    `json:"payment_intent"`
	Reason         string `json:"reason"` // a refund's; "" when null
	// Charge is a refund's or dispute's charge: its id, or the charge
	// (a listed refund's: expand[]=data.charge.refunds).
	Charge            json.RawMessage `json:"charge"`
	Created           int64           `json:"created"`
	CancelAtPeriodEnd bool            `json:"cancel_at_period_end"`
	CancelAt          *int64          `json:"cancel_at"`
	EndedAt           *int64          `json:"ended_at"`
	Plan              *struct {
		ID string `json:"id"`
	} `json:"plan"`
	Items *struct {
		Data []struct {
			Price struct {
				ID string `json:"id"`
			} `json:"price"`
		} `json:"data"`
	} `json:"items"`
}

// ListObjects returns one page of GET /v1/charges, /v1/refunds,
// /v1/disputes or /v1/subscriptions (status=all): created[gte] q.From,
// starting_after q.Cursor, limit q.Limit (1 to 100, default 100), with the
// pinned Stripe-Version if any; Next is the last item's id when has_more.
// Charges not succeeded (pending, failed) and dispute inquiries
// (warning_*, prevented), which move no money, are left out of Objects.
// A charge captured in part is a payment of amount_captured, and what
// its refunds took is amount_refunded less the release of the rest
// (stripecapture.Refunded), as the mapping books it. Refunds are listed
// with their charges and the charges' refunds (expand[]=data.charge.refunds):
// the release itself (partialRelease) is left out, and so is a refund
// that released an authorization never captured (reason
// expired_uncaptured_charge), as the mapping books neither. Errors are
// adapter.ObjectLister's.
func (c *Client) ListObjects(ctx context.Context, q adapter.ObjectQuery) (adapter.ObjectPage, error) {
	path, ok := listPaths[q.Kind]
	if !ok {
		return adapter.ObjectPage{}, nil
	}
	limit := q.Limit
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	v := url.Values{"limit": {strconv.Itoa(limit)}}
	if !q.From.IsZero() {
		v.Set("created[gte]", strconv.FormatInt(q.From.Unix(), 10))
	}
	if q.Kind == adapter.KindSubscription {
		v.Set("status", "all")
	}
	if q.Kind == adapter.KindRefund {
		// Each refund's charge, with the charge's refunds: they say which
		// refund released what a partial capture left uncaptured.
		v.Set("expand[]", "data.charge.refunds")
	}
	if q.Cursor != "" {
		v.Set("starting_after", q.Cursor)
	}
	b, got, err := apiget.ListWith(ctx, c.HTTP, c.BaseURL, c.Key, path, v, c.versionHeader())
	if err != nil {
		return adapter.ObjectPage{}, fmt.Errorf("stripe: list %s: %w", path, err)
	}
	var page struct {
		Object  string   `json:"object"`
		Data    []listed `json:"data"`
		HasMore bool     `json:"has_more"`
	}
	if err := json.Unmarshal(b, &page); err != nil || page.Object != "list" || page.Data == nil {
		return adapter.ObjectPage{}, fmt.Errorf("stripe: list %s: the answer is not a Stripe list (%.100q): %w", path, b, payhook.ErrMalformed)
	}
	if page.HasMore && len(page.Data) == 0 {
		return adapter.ObjectPage{}, fmt.Errorf("stripe: list %s: a page that says more follow lists nothing: %w", path, payhook.ErrMalformed)
	}
	var p adapter.ObjectPage
	releases := map[string]string{}
	for _, l := range page.Data {
		o, keep, err := l.object(q.Kind, got.Get(VersionHeader))
		if err == nil && keep && q.Kind == adapter.KindRefund {
			var release bool
			release, err = c.partialRelease(ctx, l, releases)
			keep = !release
		}
		if err != nil {
			return adapter.ObjectPage{}, fmt.Errorf("stripe: list %s: %w", path, err)
		}
		if keep {
			p.Objects = append(p.Objects, o)
		}
	}
	if page.HasMore {
		p.Next = page.Data[len(page.Data)-1].ID
	}
	return p, nil
}

// idOf reads an expandable field: an id, or an object with one.
func idOf(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		s, _ := v["id"].(string)
		return s
	}
	return ""
}

// rawID reads an expandable field as it came: an id, or an object with
// one; "" for anything else.
func rawID(b json.RawMessage) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return ""
	}
	return idOf(v)
}

// partialRelease reports whether listed refund l is the one Stripe made
// at a partial capture of its charge to release the rest, which the
// mapping leaves out (stripecapture.Release decides for both): l's charge,
// expanded with its refunds, captured in part, and l the release among
// them. The charge's refunds cut short (has_more) are listed to the end
// first (allRefunds). A charge that does not list its refunds decides as
// the mapping's fetched refund does: l is the release when it could be
// and the charge's amount_refunded is only the rest. releases caches the
// decision per charge id within a page ("" none).
func (c *Client) partialRelease(ctx context.Context, l listed, releases map[string]string) (bool, error) {
	if len(l.Charge) == 0 || l.Charge[0] != '{' {
		return false, nil // not expanded: nothing tells
	}
	type chargeRefunds struct {
		Data    []listed `json:"data"`
		HasMore bool     `json:"has_more"`
	}
	var ch struct {
		ID             string         `json:"id"`
		Amount         int64          `json:"amount"`
		AmountCaptured *int64         `json:"amount_captured"`
		AmountRefunded int64          `json:"amount_refunded"`
		Captured       *bool          `json:"captured"`
		Refunds        *chargeRefunds `json:"refunds"`
	}
	if err := json.Unmarshal(l.Charge, &ch); err != nil {
		return false, fmt.Errorf("the charge of refund %s: %v: %w", l.ID, err, payhook.ErrMalformed)
	}
	if ch.AmountCaptured == nil {
		return false, nil
	}
	remainder := stripecapture.Remainder(ch.Amount, *ch.AmountCaptured, ch.Captured == nil || *ch.Captured)
	if stripecapture.Release(remainder, []stripecapture.Refund{l.refund()}) < 0 {
		return false, nil // no partial capture, or l cannot be its release
	}
	if ch.Refunds == nil {
		return ch.AmountRefunded == remainder, nil
	}
	if id, ok := releases[ch.ID]; ok && ch.ID != "" {
		return id == l.ID, nil
	}
	if ch.Refunds.HasMore {
		b, err := c.allRefunds(ctx, l.Charge)
		if err != nil {
			return false, err
		}
		var all struct {
			Refunds chargeRefunds `json:"refunds"`
		}
		if err := json.Unmarshal(b, &all); err != nil {
			return false, fmt.Errorf("the refunds of charge %s: %v: %w", ch.ID, err, payhook.ErrMalformed)
		}
		ch.Refunds = &all.Refunds
	}
	refunds := make([]stripecapture.Refund, len(ch.Refunds.Data))
	for i, r := range ch.Refunds.Data {
		refunds[i] = r.refund()
	}
	release := ""
	if i := stripecapture.Release(remainder, refunds); i >= 0 {
		release = ch.Refunds.Data[i].ID
	}
	releases[ch.ID] = release
	return release == l.ID, nil
}

// refund is what stripecapture reads of a refund.
func (l listed) refund() stripecapture.Refund {
	return stripecapture.Refund{Amount: l.Amount, Reason: l.Reason, Status: l.Status, Created: l.Created}
}

// object normalizes a listed object into payhook's vocabulary, and says
// whether reconciliation keeps it.
func (l listed) object(kind, version string) (adapter.Object, bool, error) {
	if l.ID == "" || l.Created <= 0 {
		return adapter.Object{}, false, fmt.Errorf("a listed %s without an id or created (%q, %d): %w", kind, l.ID, l.Created, payhook.ErrMalformed)
	}
	o := adapter.Object{
		Kind: kind, Ref: l.ID, Amount: l.Amount, Currency: strings.ToUpper(l.Currency),
		Created: time.Unix(l.Created, 0).UTC(), APIVersion: version,
	}
	pay := idOf(l.PaymentIntent)
	if pay == "" {
		pay = rawID(l.Charge)
	}
	switch kind {
	case adapter.KindPayment:
		// An authorization never captured is no payment (Stripe says
		// succeeded of it all the same); a partial capture is what it
		// captured, as the mapping reads it.
		if l.Status != "succeeded" || (l.Captured != nil && !*l.Captured) || (l.AmountCaptured != nil && *l.AmountCaptured == 0) {
			return o, false, nil
		}
		// amount_refunded counts the refund that released what a partial
		// capture left uncaptured: the mapping books none of it.
		o.RefundedAmount = l.AmountRefunded
		if l.AmountCaptured != nil {
			o.Amount = *l.AmountCaptured
			o.RefundedAmount = stripecapture.Refunded(l.Amount, *l.AmountCaptured, l.AmountRefunded, true)
		}
		if pay != "" {
			o.Ref = pay
		}
		switch {
		case o.RefundedAmount <= 0:
			o.Status = "succeeded"
		case o.RefundedAmount < o.Amount:
			o.Status = "partially_refunded"
		default:
			o.Status = "refunded"
		}
	case adapter.KindRefund:
		// Stripe's release of an authorization never captured moves no
		// money (the mapping books none).
		if l.Reason == stripecapture.ReasonReleased {
			return o, false, nil
		}
		o.PaymentRef, o.Status = pay, l.Status
		if l.Status == "canceled" {
			o.Status = "failed"
		}
	case adapter.KindDispute:
		o.PaymentRef = pay
		switch {
		case strings.HasPrefix(l.Status, "warning_") || l.Status == "prevented":
			return o, false, nil
		case l.Status == "won" || l.Status == "lost":
			o.Status = l.Status
		default:
			o.Status = "open"
		}
	case adapter.KindSubscription:
		o.Amount, o.Currency = 0, ""
		if l.Plan != nil {
			o.Plan = l.Plan.ID
		}
		if o.Plan == "" && l.Items != nil && len(l.Items.Data) > 0 {
			o.Plan = l.Items.Data[0].Price.ID
		}
		o.Status = subscriptionStatus(l)
	}
	return o, true, nil
}

// subscriptionStatus maps a Stripe subscription's status as payhook's
// Stripe mapping does: set to cancel is canceled, canceled with ended_at
// is ended; an unpaid status is kept.
func subscriptionStatus(l listed) string {
	switch l.Status {
	case "active", "trialing":
		if l.CancelAtPeriodEnd || l.CancelAt != nil {
			return "canceled"
		}
		return "active"
	case "canceled":
		if l.EndedAt == nil {
			return "canceled"
		}
		return "ended"
	case "incomplete_expired":
		return "ended"
	}
	return l.Status
}
