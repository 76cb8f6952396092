package flavour_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/billete"
	"github.com/payhook/payhook/provider/crypto"
	"github.com/payhook/payhook/provider/paddle"
	"github.com/payhook/payhook/provider/stripe"
	"github.com/payhook/payhook/sim/flavour"
)

// verifiers builds payhook's own verifier for each flavour.
var verifiers = map[string]func(secrets []string) (payhook.Verifier, error){
	"stripe": func(s []string) (payhook.Verifier, error) { return stripe.New(stripe.Config{Secrets: s}) },
	"paddle": func(s []string) (payhook.Verifier, error) { return paddle.New(paddle.Config{Secrets: s}) },
	"billete": func(s []string) (payhook.Verifier, error) {
		return billete.New(billete.Config{Secrets: s})
	},
	"crypto": func(s []string) (payhook.Verifier, error) { return crypto.New(crypto.Config{Secrets: s}) },
}

// wantTypes is the provider type each flavour must deliver, per neutral
// type (written out here, independently of the package's tables).
var wantTypes = map[string]map[string]string{
	"stripe": {
		"checkout.completed":     "checkout.session.completed",
		"payment.succeeded":      "payment_intent.succeeded",
		"payment.refunded":       "charge.refunded",
		"refund.failed":          "charge.refund.updated",
		"payment.charged_back":   "charge.dispute.created",
		"payment.chargeback_won": "charge.dispute.closed",
		"subscription.created":   "customer.subscription.created",
		"subscription.updated":   "customer.subscription.updated",
		"subscription.renewed":   "customer.subscription.updated",
		"subscription.canceled":  "customer.subscription.updated",
		"subscription.ended":     "customer.subscription.deleted",
		"invoice.settled":        "invoice.paid",
		"webhook_endpoint.test":  "ping",
	},
	"paddle": {
		"checkout.completed":     "transaction.completed",
		"payment.succeeded":      "transaction.paid",
		"payment.refunded":       "adjustment.created",
		"refund.failed":          "adjustment.updated",
		"payment.charged_back":   "adjustment.created",
		"payment.chargeback_won": "adjustment.created",
		"subscription.created":   "subscription.created",
		"subscription.updated":   "subscription.updated",
		"subscription.renewed":   "subscription.updated",
		"subscription.canceled":  "subscription.updated",
		"subscription.ended":     "subscription.canceled",
		"invoice.settled":        "transaction.completed",
		"webhook_endpoint.test":  "notification.test",
	},
	"crypto": {
		"checkout.completed":     "CheckoutCompleted",
		"payment.succeeded":      "PaymentSucceeded",
		"payment.refunded":       "PaymentRefunded",
		"refund.failed":          "RefundFailed",
		"payment.charged_back":   "PaymentChargedBack",
		"payment.chargeback_won": "PaymentChargebackWon",
		"subscription.created":   "SubscriptionCreated",
		"subscription.updated":   "SubscriptionUpdated",
		"subscription.renewed":   "SubscriptionRenewed",
		"subscription.canceled":  "SubscriptionCanceled",
		"subscription.ended":     "SubscriptionEnded",
		"invoice.settled":        "InvoiceSettled",
		"webhook_endpoint.test":  "WebhookEndpointTest",
	},
}

// wantType returns the type flavour name delivers for neutral type t.
func wantType(name, t string) string {
	if name == "billete" {
		return t
	}
	return wantTypes[name][t]
}

var base = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

// sample returns an event of neutral type t with realistic data.
func sample(t string, n int, env string) flavour.Event {
	ev := flavour.Event{
		ID: fmt.Sprintf("evt_%024d", n), Type: t, CreatedAt: base.Add(time.Duration(n) * time.Minute),
		Environment: env, APIVersion: "2026-01-01", Seq: int64(n),
	}
	switch t {
	case "checkout.completed":
		ev.ObjectID = "chk_1"
		ev.Data = map[string]any{"id": "chk_1", "amount": 4200, "currency": "eur", "status": "completed",
			"metadata": map[string]any{"order_id": "ord_1"}, "payment_id": "pay_1"}
	case "payment.succeeded", "payment.charged_back", "payment.chargeback_won":
		ev.ObjectID = "pay_1"
		status := "succeeded"
		if t == "payment.charged_back" {
			status = "charged_back"
		}
		ev.Data = map[string]any{"id": "pay_1", "amount": 4200, "currency": "eur", "status": status,
			"refunded_amount": 0, "order_id": "ord_1", "checkout_id": "chk_1"}
		if t != "payment.succeeded" {
			ev.Data["dispute_id"] = "dp_pay_1"
			ev.Data["charged_back_at"] = base.Format(time.RFC3339Nano)
		}
	case "payment.refunded":
		ev.ObjectID = "pay_1"
		ev.Data = map[string]any{"id": "pay_1", "amount": 4200, "currency": "eur", "status": "refunded",
			"refunded_amount": 1000, "order_id": "ord_1", "checkout_id": "chk_1",
			"refund": map[string]any{"id": "re_1", "amount": 1000, "status": "succeeded"}}
	case "refund.failed":
		ev.ObjectID = "re_2"
		ev.Data = map[string]any{"id": "re_2", "payment_id": "pay_1", "amount": 500, "currency": "eur",
			"status": "failed", "reason": "insufficient_funds"}
	case "invoice.settled":
		ev.ObjectID = "inv_1"
		ev.Data = map[string]any{"id": "inv_1", "amount": 150000, "currency": "BTC", "order_id": "ord_9",
			"chain_ref": "txid:ab12", "status": "settled"}
	case "webhook_endpoint.test":
		ev.ObjectID = "we_1"
		ev.Data = map[string]any{"endpoint_id": "we_1"}
	default: // subscriptions
		ev.ObjectID = "sub_1"
		ev.Data = map[string]any{"id": "sub_1", "customer": "cus_1", "plan": "pro", "status": "active",
			"current_period_end": base.Add(30 * 24 * time.Hour).Format(time.RFC3339),
			"updated_at":         ev.CreatedAt.Format(time.RFC3339Nano)}
	}
	return ev
}

func flavours(t *testing.T) []flavour.Flavour {
	t.Helper()
	var out []flavour.Flavour
	for _, n := range flavour.Names() {
		f, err := flavour.ByName(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// deliver renders and signs ev with secrets at time at.
func deliver(t *testing.T, f flavour.Flavour, ev flavour.Event, deliveryID string, secrets []string, at time.Time) payhook.Delivery {
	t.Helper()
	body, err := f.Body(ev, deliveryID)
	if err != nil {
		t.Fatalf("Body: %v", err)
	}
	if !json.Valid(body) {
		t.Fatalf("Body is not JSON: %s", body)
	}
	h, err := f.Sign(secrets, ev, deliveryID, body, at)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return payhook.Delivery{Header: h, Body: body, ReceivedAt: at.Add(2 * time.Second)}
}

func TestNamesAndByName(t *testing.T) {
	t.Parallel()
	if got, want := flavour.Names(), []string{"stripe", "paddle", "billete", "crypto"}; !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	for _, f := range flavours(t) {
		if !slices.Contains(provider.Names(), f.Provider()) {
			t.Errorf("%s: Provider() = %q is no payhook provider", f.Name(), f.Provider())
		}
	}
	if _, err := flavour.ByName("adyen"); err == nil || !strings.Contains(err.Error(), "stripe") {
		t.Fatalf("ByName(adyen) = %v, want an error listing the flavours", err)
	}
}

// TestDeliveriesVerify renders and signs every event type in every
// flavour and checks payhook's own verifier accepts it and reads the
// right envelope.
func TestDeliveriesVerify(t *testing.T) {
	t.Parallel()
	for _, f := range flavours(t) {
		for i, typ := range flavour.Types() {
			for _, env := range []string{"test", "live"} {
				t.Run(f.Name()+"/"+typ+"/"+env, func(t *testing.T) {
					t.Parallel()
					secret := f.NewSecret()
					ev := sample(typ, i+1, env)
					at := time.Now()
					d := deliver(t, f, ev, "dlv_abc", []string{secret}, at)
					for name, v := range map[string]func() (payhook.Verifier, error){
						"package": func() (payhook.Verifier, error) { return verifiers[f.Name()]([]string{secret}) },
						"provider": func() (payhook.Verifier, error) {
							return provider.New(provider.Options{Provider: f.Provider(), Secrets: []string{secret}})
						},
					} {
						vf, err := v()
						if err != nil {
							t.Fatalf("%s verifier: %v", name, err)
						}
						got, err := vf.Verify(d)
						if err != nil {
							t.Fatalf("%s Verify: %v\nheaders %v\nbody %s", name, err, d.Header, d.Body)
						}
						if got.EventID != f.EventID(ev) {
							t.Errorf("EventID = %q, flavour says %q", got.EventID, f.EventID(ev))
						}
						if want := wantType(f.Name(), typ); got.Type != want {
							t.Errorf("Type = %q, want %q", got.Type, want)
						}
						wantEnv := ""
						if f.Name() == "stripe" || f.Name() == "billete" {
							wantEnv = env
						}
						if got.Environment != wantEnv {
							t.Errorf("Environment = %q, want %q", got.Environment, wantEnv)
						}
						wantAt := ev.CreatedAt
						if f.Name() == "stripe" || f.Name() == "crypto" {
							wantAt = wantAt.Truncate(time.Second)
						}
						if !got.OccurredAt.Equal(wantAt) {
							t.Errorf("OccurredAt = %v, want %v", got.OccurredAt, wantAt)
						}
						if got.SecretID == "" {
							t.Error("no SecretID")
						}
					}
					// The verifier must reject the body changed after signing.
					vf, _ := verifiers[f.Name()]([]string{secret})
					bad := d
					bad.Body = append([]byte(" "), d.Body...)
					if _, err := vf.Verify(bad); !errors.Is(err, payhook.ErrSignature) {
						t.Errorf("tampered body: Verify = %v, want ErrSignature", err)
					}
					if got := d.Header.Get("Content-Type"); !strings.HasPrefix(got, "application/json") {
						t.Errorf("Content-Type = %q", got)
					}
				})
			}
		}
	}
}

// TestBodyShapes checks each flavour's payload fields beyond the envelope.
func TestBodyShapes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		flavour, typ string
		check        func(t *testing.T, ev flavour.Event, b map[string]any)
	}{
		{"stripe", "checkout.completed", func(t *testing.T, ev flavour.Event, b map[string]any) {
			o := path(t, b, "data", "object")
			eq(t, o["object"], "checkout.session")
			eq(t, o["amount_total"], 4200.0)
			eq(t, path(t, o, "metadata")["order_id"], "ord_1")
			eq(t, b["object"], "event")
			eq(t, b["api_version"], "2026-01-01")
			eq(t, b["livemode"], false)
			eq(t, b["created"], float64(ev.CreatedAt.Unix()))
		}},
		{"stripe", "subscription.canceled", func(t *testing.T, ev flavour.Event, b map[string]any) {
			o := path(t, b, "data", "object")
			eq(t, o["object"], "subscription")
			eq(t, o["cancel_at_period_end"], true)
			eq(t, o["current_period_end"], float64(base.Add(30*24*time.Hour).Unix()))
			eq(t, path(t, o, "plan")["id"], "pro")
		}},
		{"stripe", "payment.refunded", func(t *testing.T, ev flavour.Event, b map[string]any) {
			o := path(t, b, "data", "object")
			eq(t, o["object"], "charge")
			eq(t, o["amount_refunded"], 1000.0)
			eq(t, path(t, o, "refunds")["object"], "list")
		}},
		{"paddle", "payment.refunded", func(t *testing.T, ev flavour.Event, b map[string]any) {
			eq(t, b["notification_id"], "ntf_dlv_abc")
			o := path(t, b, "data")
			eq(t, o["action"], "refund")
			eq(t, o["transaction_id"], "pay_1")
			eq(t, path(t, o, "totals")["total"], "1000")
			eq(t, path(t, o, "custom_data")["order_id"], "ord_1")
		}},
		{"paddle", "payment.charged_back", func(t *testing.T, ev flavour.Event, b map[string]any) {
			o := path(t, b, "data")
			eq(t, o["action"], "chargeback")
			eq(t, o["id"], "adj_cb_pay_1")
			eq(t, o["status"], "approved")
			eq(t, o["transaction_id"], "pay_1")
		}},
		{"paddle", "payment.chargeback_won", func(t *testing.T, ev flavour.Event, b map[string]any) {
			o := path(t, b, "data")
			eq(t, o["action"], "chargeback_reverse") // a new adjustment, as Paddle reports a win
			eq(t, o["id"], "adj_cbr_pay_1")
			eq(t, o["status"], "approved")
			eq(t, o["transaction_id"], "pay_1")
			eq(t, o["created_at"], ev.CreatedAt.Format(time.RFC3339Nano))
			eq(t, path(t, o, "totals")["total"], "4200")
		}},
		{"stripe", "payment.charged_back", func(t *testing.T, ev flavour.Event, b map[string]any) {
			o := path(t, b, "data", "object")
			eq(t, o["object"], "dispute")
			eq(t, o["id"], "dp_pay_1")
			eq(t, o["payment_intent"], "pay_1")
			eq(t, o["status"], "needs_response")
		}},
		{"stripe", "payment.chargeback_won", func(t *testing.T, ev flavour.Event, b map[string]any) {
			o := path(t, b, "data", "object")
			eq(t, o["object"], "dispute")
			eq(t, o["id"], "dp_pay_1") // the chargeback's dispute
			eq(t, o["payment_intent"], "pay_1")
			eq(t, o["status"], "won")
			eq(t, o["amount"], 4200.0)
		}},
		{"billete", "payment.chargeback_won", func(t *testing.T, ev flavour.Event, b map[string]any) {
			o := path(t, b, "data")
			eq(t, o["id"], "pay_1")
			eq(t, o["dispute_id"], "dp_pay_1")
			eq(t, o["status"], "succeeded")
		}},
		{"crypto", "payment.chargeback_won", func(t *testing.T, ev flavour.Event, b map[string]any) {
			eq(t, b["invoiceId"], ev.ID) // not an invoice: its own event id
			eq(t, b["objectId"], "pay_1")
			eq(t, path(t, b, "data")["dispute_id"], "dp_pay_1")
		}},
		{"paddle", "refund.failed", func(t *testing.T, ev flavour.Event, b map[string]any) {
			eq(t, path(t, b, "data")["status"], "rejected")
		}},
		{"paddle", "checkout.completed", func(t *testing.T, ev flavour.Event, b map[string]any) {
			o := path(t, b, "data")
			eq(t, path(t, o, "custom_data")["order_id"], "ord_1")
			eq(t, o["currency_code"], "eur")
			eq(t, path(t, o, "details", "totals")["total"], "4200")
		}},
		{"paddle", "subscription.canceled", func(t *testing.T, ev flavour.Event, b map[string]any) {
			eq(t, path(t, b, "data", "scheduled_change")["action"], "cancel")
		}},
		{"paddle", "subscription.ended", func(t *testing.T, ev flavour.Event, b map[string]any) {
			eq(t, path(t, b, "data")["status"], "canceled")
		}},
		{"billete", "payment.succeeded", func(t *testing.T, ev flavour.Event, b map[string]any) {
			eq(t, b["id"], ev.ID)
			eq(t, b["environment"], "test")
			eq(t, b["api_version"], "2026-01-01")
			eq(t, path(t, b, "data")["order_id"], "ord_1")
		}},
		{"crypto", "invoice.settled", func(t *testing.T, ev flavour.Event, b map[string]any) {
			eq(t, b["deliveryId"], "dlv_abc")
			eq(t, b["originalDeliveryId"], "dlv_abc")
			eq(t, b["isRedelivery"], false)
			eq(t, b["storeId"], "store_sim")
			eq(t, b["invoiceId"], "inv_1")
			eq(t, b["chainRef"], "txid:ab12")
			eq(t, b["timestamp"], float64(ev.CreatedAt.Unix()))
			eq(t, path(t, b, "metadata")["orderId"], "ord_9")
			if s, _ := b["webhookId"].(string); s == "" {
				t.Error("no webhookId")
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.flavour+"/"+c.typ, func(t *testing.T) {
			t.Parallel()
			f, _ := flavour.ByName(c.flavour)
			ev := sample(c.typ, 7, "test")
			body, err := f.Body(ev, "dlv_abc")
			if err != nil {
				t.Fatal(err)
			}
			var b map[string]any
			if err := json.Unmarshal(body, &b); err != nil {
				t.Fatal(err)
			}
			c.check(t, ev, b)
		})
	}
}

func path(t *testing.T, m map[string]any, keys ...string) map[string]any {
	t.Helper()
	for _, k := range keys {
		n, ok := m[k].(map[string]any)
		if !ok {
			t.Fatalf("%s is %T, not an object, in %v", k, m[k], m)
		}
		m = n
	}
	return m
}

func eq(t *testing.T, got, want any) {
	t.Helper()
	if got != want {
		t.Errorf("got %v (%T), want %v (%T)", got, got, want, want)
	}
}

// TestRotation signs with two secrets; each one alone must verify (crypto:
// only the first, as BTCPay signs with one secret).
func TestRotation(t *testing.T) {
	t.Parallel()
	for _, f := range flavours(t) {
		t.Run(f.Name(), func(t *testing.T) {
			t.Parallel()
			cur, old, other := f.NewSecret(), f.NewSecret(), f.NewSecret()
			ev := sample("payment.succeeded", 3, "live")
			d := deliver(t, f, ev, "dlv_1", []string{cur, old}, time.Now())
			for _, c := range []struct {
				name    string
				secrets []string
				ok      bool
			}{
				{"current", []string{cur}, true},
				{"old", []string{old}, f.Name() != "crypto"},
				{"both", []string{other, old, cur}, true},
				{"other", []string{other}, false},
			} {
				v, err := verifiers[f.Name()](c.secrets)
				if err != nil {
					t.Fatal(err)
				}
				_, err = v.Verify(d)
				if c.ok && err != nil {
					t.Errorf("%s: Verify = %v, want ok", c.name, err)
				}
				if !c.ok && !errors.Is(err, payhook.ErrSignature) {
					t.Errorf("%s: Verify = %v, want ErrSignature", c.name, err)
				}
			}
		})
	}
}

// TestTimestamp checks the signed time is at: stale deliveries fail where
// the provider signs a timestamp.
func TestTimestamp(t *testing.T) {
	t.Parallel()
	for _, f := range flavours(t) {
		t.Run(f.Name(), func(t *testing.T) {
			t.Parallel()
			secret := f.NewSecret()
			ev := sample("checkout.completed", 1, "test")
			d := deliver(t, f, ev, "dlv_1", []string{secret}, time.Now().Add(-time.Hour))
			d.ReceivedAt = time.Now()
			v, _ := verifiers[f.Name()]([]string{secret})
			_, err := v.Verify(d)
			if f.Name() == "crypto" {
				if err != nil {
					t.Errorf("crypto signs no time, Verify = %v", err)
				}
			} else if !errors.Is(err, payhook.ErrSignature) {
				t.Errorf("hour-old signature: Verify = %v, want ErrSignature", err)
			}
		})
	}
}

func TestSignErrors(t *testing.T) {
	t.Parallel()
	for _, f := range flavours(t) {
		ev := sample("checkout.completed", 1, "test")
		body, _ := f.Body(ev, "d")
		for _, secrets := range [][]string{nil, {""}} {
			if _, err := f.Sign(secrets, ev, "d", body, time.Now()); err == nil {
				t.Errorf("%s: Sign(%q) = nil error", f.Name(), secrets)
			}
		}
	}
	if _, err := flavour.Billete().Sign([]string{"not-whsec"}, sample("checkout.completed", 1, "test"), "d", []byte("{}"), time.Now()); err == nil {
		t.Error("billete: Sign with a non-whsec secret = nil error")
	}
}

func TestNewSecret(t *testing.T) {
	t.Parallel()
	formats := map[string]*regexp.Regexp{
		"stripe":  regexp.MustCompile(`^whsec_[A-Za-z0-9]{32}$`),
		"paddle":  regexp.MustCompile(`^pdl_ntfset_[a-z0-9]{26}_[A-Za-z0-9]{32}$`),
		"billete": regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{32}$`),
		"crypto":  regexp.MustCompile(`^[A-Za-z0-9]{32}$`),
	}
	for _, f := range flavours(t) {
		seen := map[string]bool{}
		for range 50 {
			s := f.NewSecret()
			if !formats[f.Name()].MatchString(s) {
				t.Fatalf("%s: NewSecret() = %q", f.Name(), s)
			}
			if seen[s] {
				t.Fatalf("%s: NewSecret repeated %q", f.Name(), s)
			}
			seen[s] = true
		}
		// From a seeded source: the same format, and the same secrets
		// again from the same seed.
		draw := func(seed byte) []string {
			r := rand.NewChaCha8([32]byte{seed})
			return []string{f.NewSecretFrom(r), f.NewSecretFrom(r)}
		}
		a, b, c := draw(1), draw(1), draw(2)
		if !formats[f.Name()].MatchString(a[0]) || a[0] == a[1] {
			t.Fatalf("%s: NewSecretFrom drew %q", f.Name(), a)
		}
		if !slices.Equal(a, b) || slices.Equal(a, c) {
			t.Fatalf("%s: NewSecretFrom(seed 1) = %q, then %q; seed 2: %q", f.Name(), a, b, c)
		}
	}
}

func TestCryptoEventIDs(t *testing.T) {
	t.Parallel()
	f := flavour.Crypto()
	secret := f.NewSecret()
	v, _ := crypto.New(crypto.Config{Secrets: []string{secret}})
	ev := sample("invoice.settled", 1, "live")
	// Two deliveries (new delivery ids) of one settlement: one event id.
	var ids []string
	for _, dlv := range []string{"dlv_1", "dlv_2"} {
		env, err := v.Verify(deliver(t, f, ev, dlv, []string{secret}, time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, env.EventID)
	}
	if ids[0] != ids[1] || ids[0] != "inv_1:InvoiceSettled" {
		t.Fatalf("event ids %v, want inv_1:InvoiceSettled twice", ids)
	}
	// Two updates of one subscription stay two events.
	a, b := sample("subscription.updated", 1, "test"), sample("subscription.updated", 2, "test")
	if f.EventID(a) == f.EventID(b) {
		t.Fatalf("two subscription updates share event id %q", f.EventID(a))
	}
}

func TestEventsQuery(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	subUpdates := "subscription.updated,subscription.renewed,subscription.canceled"
	cases := []struct {
		flavour, query string
		want           flavour.Query
		bad            bool
	}{
		{flavour: "billete", query: "", want: flavour.Query{}},
		{flavour: "billete", query: "type=payment.refunded&created_from=2026-03-01T00:00:00Z&cursor=evt_1&limit=50",
			want: flavour.Query{Type: "payment.refunded", CreatedFrom: from, Cursor: "evt_1", Limit: 50}},
		{flavour: "billete", query: "type=payment.refunded,refund.failed", want: flavour.Query{Type: "payment.refunded,refund.failed"}},
		{flavour: "billete", query: "other=1", want: flavour.Query{}},
		{flavour: "billete", query: "type=charge.refunded", bad: true},
		{flavour: "billete", query: "created_from=yesterday", bad: true},
		{flavour: "billete", query: "created_from=1772323200", bad: true},
		{flavour: "billete", query: "limit=0", bad: true},
		{flavour: "billete", query: "limit=1001", bad: true},
		{flavour: "billete", query: "limit=ten", bad: true},
		{flavour: "billete", query: "cursor=", bad: true},
		{flavour: "billete", query: "limit=1&limit=2", bad: true},

		{flavour: "stripe", query: "type=charge.refunded&created[gte]=1772323200&starting_after=evt_9&limit=100",
			want: flavour.Query{Type: "payment.refunded", CreatedFrom: from, Cursor: "evt_9", Limit: 100}},
		{flavour: "stripe", query: "type=customer.subscription.updated", want: flavour.Query{Type: subUpdates}},
		{flavour: "stripe", query: "type=customer.subscription.*",
			want: flavour.Query{Type: "subscription.created," + subUpdates + ",subscription.ended"}},
		{flavour: "stripe", query: "created[gt]=1772323199", want: flavour.Query{CreatedFrom: from}},
		{flavour: "stripe", query: "type=payment.refunded", bad: true},
		{flavour: "stripe", query: "created[gte]=2026-03-01T00:00:00Z", bad: true},
		{flavour: "stripe", query: "limit=101", bad: true},
		{flavour: "stripe", query: "ending_before=evt_1", bad: true},
		{flavour: "stripe", query: "cursor=evt_1", bad: true},
		{flavour: "stripe", query: "types[]=charge.refunded&types[]=charge.dispute.created&limit=3",
			want: flavour.Query{Type: "payment.refunded,payment.charged_back", Limit: 3}},
		{flavour: "stripe", query: "types[0]=charge.refunded&types[1]=charge.refunded", want: flavour.Query{Type: "payment.refunded"}},
		{flavour: "stripe", query: "types[]=charge.refunded&type=charge.refunded", bad: true},
		{flavour: "stripe", query: "types[]=charge.refunded&types[]=payment.refunded", bad: true},
		{flavour: "stripe", query: "types[]=", bad: true},
		{flavour: "stripe", query: "types=charge.refunded", bad: true},
		{flavour: "stripe", query: strings.Repeat("types[]=charge.refunded&", 21), bad: true},

		{flavour: "paddle", query: "event_type=adjustment.created&after=evt_3&per_page=200&occurred_at[gte]=2026-03-01T00:00:00Z",
			want: flavour.Query{Type: "payment.refunded,payment.charged_back,payment.chargeback_won", CreatedFrom: from, Cursor: "evt_3", Limit: 200}},
		{flavour: "paddle", query: "event_type=subscription.canceled,transaction.paid&created_from=2026-03-01T00:00:00Z",
			want: flavour.Query{Type: "subscription.ended,payment.succeeded", CreatedFrom: from}},
		{flavour: "paddle", query: "event_type=payment.succeeded", bad: true},
		{flavour: "paddle", query: "per_page=201", bad: true},
		{flavour: "paddle", query: "occurred_at[gte]=soon", bad: true},

		{flavour: "crypto", query: "type=InvoiceSettled&cursor=evt_2&limit=5", want: flavour.Query{Type: "invoice.settled", Cursor: "evt_2", Limit: 5}},
		{flavour: "crypto", query: "type=invoice.settled", want: flavour.Query{Type: "invoice.settled"}},
		{flavour: "crypto", query: "type=InvoiceExpired", bad: true},
		{flavour: "crypto", query: "created_from=x", bad: true},
	}
	for _, c := range cases {
		t.Run(c.flavour+"?"+c.query, func(t *testing.T) {
			t.Parallel()
			f, _ := flavour.ByName(c.flavour)
			r := httptest.NewRequest(http.MethodGet, f.EventsPath()+"?"+c.query, nil)
			got, err := f.EventsQuery(r)
			if c.bad {
				if !errors.Is(err, flavour.ErrQuery) {
					t.Fatalf("EventsQuery = %+v, %v; want ErrQuery", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("EventsQuery: %v", err)
			}
			if got.Type != c.want.Type || !got.CreatedFrom.Equal(c.want.CreatedFrom) || got.Cursor != c.want.Cursor || got.Limit != c.want.Limit {
				t.Fatalf("EventsQuery = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestEventsPath(t *testing.T) {
	t.Parallel()
	want := map[string]string{"stripe": "/v1/events", "paddle": "/events", "billete": "/events", "crypto": "/events"}
	for _, f := range flavours(t) {
		if got := f.EventsPath(); got != want[f.Name()] {
			t.Errorf("%s: EventsPath() = %q, want %q", f.Name(), got, want[f.Name()])
		}
	}
}

func TestEventsPage(t *testing.T) {
	t.Parallel()
	evs := []flavour.Event{sample("checkout.completed", 1, "test"), sample("invoice.settled", 2, "test"), sample("subscription.ended", 3, "test")}
	for _, f := range flavours(t) {
		for _, next := range []string{"", "evt_next"} {
			for _, page := range [][]flavour.Event{evs, nil} {
				t.Run(fmt.Sprintf("%s/next=%q/%d", f.Name(), next, len(page)), func(t *testing.T) {
					t.Parallel()
					b, err := f.EventsPage(page, next)
					if err != nil {
						t.Fatal(err)
					}
					var p struct {
						Object     string            `json:"object"`
						Data       []json.RawMessage `json:"data"`
						HasMore    *bool             `json:"has_more"`
						NextCursor *string           `json:"next_cursor"`
						URL        string            `json:"url"`
						Meta       struct {
							Pagination struct {
								PerPage int    `json:"per_page"`
								Next    string `json:"next"`
								HasMore *bool  `json:"has_more"`
							} `json:"pagination"`
						} `json:"meta"`
					}
					if err := json.Unmarshal(b, &p); err != nil {
						t.Fatalf("page is not JSON: %v\n%s", err, b)
					}
					if !strings.Contains(string(b), `"data":[`) {
						t.Errorf("data is not an array: %s", b)
					}
					if len(p.Data) != len(page) {
						t.Fatalf("%d events in data, want %d", len(p.Data), len(page))
					}
					// Each listed event is the flavour's payload, oldest first.
					for i, raw := range p.Data {
						want, _ := f.Body(page[i], "")
						if string(raw) != string(want) {
							t.Errorf("data[%d] = %s, want %s", i, raw, want)
						}
					}
					hasMore := p.HasMore
					switch f.Name() {
					case "stripe":
						eq(t, p.Object, "list")
						eq(t, p.URL, "/v1/events")
					case "paddle":
						hasMore = p.Meta.Pagination.HasMore
						eq(t, p.Meta.Pagination.PerPage, len(page))
						wantNext := ""
						switch {
						case next != "":
							wantNext = "/events?after=" + next
						case len(page) > 0:
							wantNext = "/events?after=" + page[len(page)-1].ID
						}
						eq(t, p.Meta.Pagination.Next, wantNext)
					default:
						eq(t, p.Object, "list")
						if next == "" && p.NextCursor != nil || next != "" && (p.NextCursor == nil || *p.NextCursor != next) {
							t.Errorf("next_cursor = %v, want %q", p.NextCursor, next)
						}
					}
					if hasMore == nil || *hasMore != (next != "") {
						t.Errorf("has_more = %v, want %v", hasMore, next != "")
					}
				})
			}
		}
	}
}

func TestSelect(t *testing.T) {
	t.Parallel()
	var evs []flavour.Event
	for i := 1; i <= 10; i++ {
		typ := "payment.succeeded"
		if i%3 == 0 {
			typ = "subscription.renewed"
		}
		evs = append(evs, sample(typ, i, "test"))
	}
	ids := func(page []flavour.Event) []string {
		var out []string
		for _, e := range page {
			out = append(out, e.ID[len(e.ID)-2:])
		}
		return out
	}
	cases := []struct {
		name      string
		q         flavour.Query
		want      []string
		wantNext  string
		wantError error
	}{
		{"all", flavour.Query{}, []string{"01", "02", "03", "04", "05", "06", "07", "08", "09", "10"}, "", nil},
		{"limit", flavour.Query{Limit: 4}, []string{"01", "02", "03", "04"}, evs[3].ID, nil},
		{"cursor", flavour.Query{Limit: 4, Cursor: evs[3].ID}, []string{"05", "06", "07", "08"}, evs[7].ID, nil},
		{"last page exactly full", flavour.Query{Limit: 2, Cursor: evs[7].ID}, []string{"09", "10"}, "", nil},
		{"type list", flavour.Query{Type: "subscription.updated,subscription.renewed"}, []string{"03", "06", "09"}, "", nil},
		{"type and limit", flavour.Query{Type: "subscription.renewed", Limit: 2}, []string{"03", "06"}, evs[5].ID, nil},
		{"created from", flavour.Query{CreatedFrom: evs[7].CreatedAt}, []string{"08", "09", "10"}, "", nil},
		{"unknown cursor", flavour.Query{Cursor: "evt_gone"}, nil, "", flavour.ErrCursor},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			page, next, err := flavour.Select(evs, c.q)
			if !errors.Is(err, c.wantError) {
				t.Fatalf("Select error = %v, want %v", err, c.wantError)
			}
			if got := ids(page); !slices.Equal(got, c.want) {
				t.Errorf("page = %v, want %v", got, c.want)
			}
			if next != c.wantNext {
				t.Errorf("next = %q, want %q", next, c.wantNext)
			}
		})
	}
}

// TestQueryRoundTrip filters through each flavour's type names: a query
// for the provider's name of a neutral type finds that event.
func TestQueryRoundTrip(t *testing.T) {
	t.Parallel()
	params := map[string]string{"stripe": "type", "paddle": "event_type", "billete": "type", "crypto": "type"}
	for _, f := range flavours(t) {
		for i, typ := range flavour.Types() {
			ev := sample(typ, i, "test")
			name := wantType(f.Name(), typ)
			r := httptest.NewRequest(http.MethodGet, f.EventsPath()+"?"+params[f.Name()]+"="+name, nil)
			q, err := f.EventsQuery(r)
			if err != nil {
				t.Fatalf("%s %s: %v", f.Name(), name, err)
			}
			if !q.Match(ev) {
				t.Errorf("%s: query %s=%s (Type %q) does not match a %s event", f.Name(), params[f.Name()], name, q.Type, typ)
			}
		}
	}
}
