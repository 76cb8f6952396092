package billete

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/apiget"
	"github.com/payhook/payhook/provider/adapter"
)

var _ adapter.Refunder = (*Client)(nil)

// Refund asks POST /refunds {payment_id, amount} with the Idempotency-Key
// r.Key. Billete has no refund reason; r.Reason is not sent. Errors are
// adapter.Refunder's.
func (c *Client) Refund(ctx context.Context, r adapter.RefundRequest) (adapter.RefundResult, error) {
	body, err := json.Marshal(map[string]any{"payment_id": r.Payment, "amount": r.Amount})
	if err != nil {
		return adapter.RefundResult{}, fmt.Errorf("billete: refund: %w", err)
	}
	h := c.versionHeader()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Idempotency-Key", r.Key)
	b, rh, err := apiget.Post(ctx, c.HTTP, c.BaseURL, c.Key, "refunds", "application/json", body, h)
	if err != nil {
		return adapter.RefundResult{}, fmt.Errorf("billete: refund %s: %w", r.Payment, err)
	}
	var out struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.ID == "" {
		return adapter.RefundResult{}, fmt.Errorf("billete: refund %s: the answer is not a refund: %.200s: %w", r.Payment, b, payhook.ErrMalformed)
	}
	return adapter.RefundResult{Ref: out.ID, Status: out.Status, Replayed: rh.Get("Idempotent-Replayed") == "true"}, nil
}
