package paddle

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/apiget"
	"github.com/payhook/payhook/provider/adapter"
)

var _ adapter.ObjectGetter = (*Client)(nil)

// getPaths are Paddle's get routes by object kind, "{id}" standing for
// the entity's (path-escaped) id: a payment is its transaction, as
// ListObjects names it.
var getPaths = map[string]string{adapter.KindPayment: "transactions/{id}", adapter.KindSubscription: "subscriptions/{id}"}

// GetObject returns the entity of kind whose reference is ref ({"data":
// entity}), in the pinned Paddle-Version if any, read as ListObjects
// reads a listed one:
//
//   - a subscription: GET /subscriptions/{id} (its status as payhook's
//     Paddle mapping says it, its first price, created_at);
//   - a payment: GET /transactions/{id}?include=adjustments, what the
//     customer paid, with what its approved refund adjustments took
//     (RefundedAmount, and the status it gives) and charged_back while an
//     approved chargeback is not reversed (see adjusted): unlike a listed
//     transaction, a retrieved one says all of it, whenever its
//     adjustments were made. A transaction not paid or completed is the
//     payment at the provider all the same: its Paddle status (billed,
//     canceled, ...), Amount 0.
//
// Its errors are adapter.ObjectGetter's: a 404 wraps payhook.ErrNotFound,
// another kind payhook.ErrInvalid, an answer that is not that entity
// payhook.ErrMalformed.
func (c *Client) GetObject(ctx context.Context, kind, ref string) (adapter.Object, error) {
	var q url.Values
	if kind == adapter.KindPayment {
		q = url.Values{"include": {"adjustments"}}
	}
	o, err := adapter.GetObject(kind, ref, getPaths, func(path string) ([]byte, http.Header, error) {
		return apiget.ObjectWith(ctx, c.HTTP, c.BaseURL, c.Key, path, q, c.versionHeader())
	}, func(b []byte, h http.Header) (adapter.Object, error) {
		var answer struct {
			Data *struct {
				listed
				Adjustments []listed `json:"adjustments"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &answer); err != nil || answer.Data == nil {
			return adapter.Object{}, fmt.Errorf("the answer is not a Paddle entity (%.100q): %w", b, payhook.ErrMalformed)
		}
		o, keep, err := answer.Data.object(kind, h.Get(VersionHeader))
		if err != nil || kind != adapter.KindPayment {
			return o, err
		}
		if !keep {
			o.Status, o.Amount, o.RefundedAmount = answer.Data.Status, 0, 0
			return o, nil
		}
		return adjusted(o, answer.Data.Adjustments)
	})
	if err != nil {
		return adapter.Object{}, fmt.Errorf("paddle: %w", err)
	}
	return o, nil
}

// adjusted is the retrieved payment o with what its transaction's
// adjustments did: the approved refunds' total taken (RefundedAmount, and
// the status it gives), charged_back while an approved chargeback is not
// reversed. Paddle marks a won chargeback reversed and creates its
// approved chargeback_reverse; a reversal whose chargeback is still
// listed approved wins one of those, so a transaction is charged back
// while its approved chargebacks outnumber the reversals not matched by a
// reversed chargeback (a chargeback after a won one stays open).
func adjusted(o adapter.Object, adjustments []listed) (adapter.Object, error) {
	o.RefundedAmount = 0
	lost, won, reverses := 0, 0, 0
	for _, a := range adjustments {
		switch a.Action {
		case "refund", "chargeback":
			kind := adapter.KindRefund
			if a.Action == "chargeback" {
				kind = adapter.KindDispute
			}
			r, keep, err := a.adjustment(adapter.Object{Kind: kind})
			if err != nil {
				return adapter.Object{}, fmt.Errorf("transaction %s: %w", o.Ref, err)
			}
			switch {
			case !keep:
			case kind == adapter.KindRefund && r.Status == "succeeded":
				o.RefundedAmount += r.Amount
			case r.Status == "lost":
				lost++
			case r.Status == "won":
				won++
			}
		case "chargeback_reverse":
			if a.Status == "approved" {
				reverses++
			}
		}
	}
	switch {
	case lost > max(0, reverses-won):
		o.Status = "charged_back"
	case o.RefundedAmount <= 0:
		o.Status = "succeeded"
	case o.RefundedAmount < o.Amount:
		o.Status = "partially_refunded"
	default:
		o.Status = "refunded"
	}
	return o, nil
}
