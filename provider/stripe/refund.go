package stripe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/apiget"
	"github.com/payhook/payhook/provider/adapter"
)

var _ adapter.Refunder = (*Client)(nil)

// Refund asks POST /v1/refunds, form-encoded: charge (a ch_… ref) or
// payment_intent (any other), amount, and reason when set, with the
// Idempotency-Key r.Key. Errors are adapter.Refunder's.
func (c *Client) Refund(ctx context.Context, r adapter.RefundRequest) (adapter.RefundResult, error) {
	form := url.Values{}
	if strings.HasPrefix(r.Payment, "ch_") {
		form.Set("charge", r.Payment)
	} else {
		form.Set("payment_intent", r.Payment)
	}
	form.Set("amount", strconv.FormatInt(r.Amount, 10))
	if r.Reason != "" {
		form.Set("reason", r.Reason)
	}
	h := c.versionHeader()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Idempotency-Key", r.Key)
	b, rh, err := apiget.Post(ctx, c.HTTP, c.BaseURL, c.Key, "v1/refunds", "application/x-www-form-urlencoded", []byte(form.Encode()), h)
	if err != nil {
		return adapter.RefundResult{}, fmt.Errorf("stripe: refund %s: %w", r.Payment, err)
	}
	var out struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.ID == "" {
		return adapter.RefundResult{}, fmt.Errorf("stripe: refund %s: the answer is not a refund: %.200s: %w", r.Payment, b, payhook.ErrMalformed)
	}
	return adapter.RefundResult{Ref: out.ID, Status: out.Status, Replayed: rh.Get("Idempotent-Replayed") == "true"}, nil
}
