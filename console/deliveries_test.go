package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/outbox"
)

// delivery emits a fact routed to one sink and marks its delivery
// failed after 3 attempts; it returns the delivery's id.
func (e *env) delivery(subject string) int64 {
	e.t.Helper()
	ctx := context.Background()
	o, err := outbox.New(outbox.Config{DB: e.db})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := o.AddFunc("app", []string{"*"}, func(context.Context, outbox.Fact) error { return nil }); err != nil {
		e.t.Fatal(err)
	}
	f, err := outbox.NewFact("order.paid", "shop", subject, subject, t0, map[string]string{"order_id": subject})
	if err != nil {
		e.t.Fatal(err)
	}
	tx, err := e.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	emitted, err := outbox.Emit(ctx, e.db, tx, o, f, t0)
	ids := emitted.Deliveries
	if err != nil || len(ids) != 1 {
		e.t.Fatal(errors.Join(err, tx.Rollback()), ids)
	}
	if _, err := tx.Exec(`UPDATE payhook_deliveries SET status = 'failed', attempts = 3, last_error = 'connection refused'
		WHERE id = $1`, ids[0]); err != nil {
		e.t.Fatal(errors.Join(err, tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		e.t.Fatal(err)
	}
	return ids[0]
}

// resend is the env's Config.Resend: the delivery back to pending (its
// job is left out: the env's queue has no outbox).
func (e *env) resend(ctx context.Context, id int64) error {
	tx, err := e.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := outbox.ResendTx(ctx, e.db, tx, id, t0); err != nil {
		return err
	}
	return tx.Commit()
}

func TestDeliveriesResend(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL)
		ctx := context.Background()
		ids := []int64{e.delivery("ord_1")}
		c := e.client()
		csrf := c.login()
		if resp, body := c.do("GET", "/console/deliveries?status=failed", nil, nil); resp.StatusCode != 200 || !strings.Contains(body, "order.paid") || !strings.Contains(body, "Resend") {
			t.Fatalf("deliveries page = %d, without the failed delivery and its Resend", resp.StatusCode)
		}
		if resp, _ := c.do("GET", "/console/deliveries?status=lost", nil, nil); resp.StatusCode != 400 {
			t.Errorf("deliveries?status=lost = %d; want 400", resp.StatusCode)
		}
		path := fmt.Sprintf("/console/deliveries/%d/resend", ids[0])
		for _, tc := range []struct {
			name string
			path string
			form url.Values
			want int
		}{
			{"without CSRF", path, url.Values{}, 403},
			{"unknown delivery", "/console/deliveries/999999/resend", url.Values{"csrf": {csrf}}, 404},
			{"resend", path, url.Values{"csrf": {csrf}}, 303},
		} {
			if resp, _ := c.do("POST", tc.path, tc.form, nil); resp.StatusCode != tc.want {
				t.Errorf("%s = %d; want %d", tc.name, resp.StatusCode, tc.want)
			}
		}
		ds, err := outbox.ListDeliveries(ctx, e.db, outbox.DeliveryFilter{})
		if err != nil || len(ds) != 1 || ds[0].Status != outbox.StatusPending {
			t.Errorf("deliveries after resend = %+v, %v; want the one pending", ds, err)
		}
	})
}
