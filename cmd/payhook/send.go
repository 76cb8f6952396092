package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/payhook/payhook/provider/standard"
)

const sendHelp = `Usage: payhook send --secret SECRET [--url URL] [--type TYPE] [--id EVENT_ID] [--environment ENV]

Sends one event signed the Standard Webhooks way, shaped like the billete
provider's (id, type, created_at, environment, api_version, data), and
prints the answer. Sending the same --id again shows deduplication: it is
answered duplicate and not processed again; its body carries the time of
sending, so it differs from the first, and payhook also raises an
event_body_conflict alert, as it does for a provider that changed an event.

Its event is made up: a source with api_url reads each event's resource
from the provider's API before processing it, finds none, and retries the
attempt until max_attempts. Send to a source without API credentials (the
demo's), or ask the simulator for a test event (sim serve's POST
/webhook_endpoints/{id}/test).

Examples:
  payhook send --secret whsec_...
  payhook send --url http://127.0.0.1:8080/webhooks/demo --secret whsec_... --id evt_demo_1 --type checkout.completed`

func (m *Main) send(ctx context.Context, args []string) error {
	fs := m.flags("send", sendHelp)
	url := fs.String("url", "http://127.0.0.1:8080/webhooks/demo", "the webhook URL of the source")
	secret := fs.String("secret", "", "the source's signing secret, whsec_<base64> (required)")
	typ := fs.String("type", "checkout.completed", "event type")
	id := fs.String("id", "", "event id (default: a new evt_ id)")
	environment := fs.String("environment", "test", "event environment: test or live")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *secret == "" {
		return fmt.Errorf("%w: send needs --secret (serve prints the demo source's)", errUsage)
	}
	if *id == "" {
		b := make([]byte, 8)
		rand.Read(b)
		*id = "evt_" + hex.EncodeToString(b)
	}
	now := m.Now()
	// A completed checkout of 19.99 USD for order ord_<id>, shaped like
	// the recipe's provider: processing records its payment and order.
	suffix := (*id)[len(*id)-min(12, len(*id)):]
	body, err := json.Marshal(map[string]any{
		"id": *id, "type": *typ, "created_at": now.UTC().Format(time.RFC3339),
		"environment": *environment, "api_version": "2026-01-01",
		"data": map[string]any{
			"id": "chk_" + suffix, "object": "checkout", "amount": 1999, "currency": "USD", "status": "completed",
			"payment_id": "pay_" + suffix, "metadata": map[string]string{"order_id": "ord_" + suffix},
			"updated_at": now.UTC().Format(time.RFC3339Nano),
		},
	})
	if err != nil {
		return err
	}
	h, err := standard.Sign(*secret, *id, now, body)
	if err != nil {
		return fmt.Errorf("%w: send: --secret: %v (give the whsec_... secret serve printed)", errUsage, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, *url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: --url: %v", errUsage, err)
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // providers do not follow redirects
	}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("send: %w (is payhook serve running? it prints the --url to use)", err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Fprintf(m.Stdout, "sent %s (%s) → %s %s", *id, *typ, resp.Status, answer)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("send: the receiver answered %s", resp.Status)
	}
	return nil
}
