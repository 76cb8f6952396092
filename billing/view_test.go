package billing_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/internal/dbtest"
)

// The lookups take an empty source to mean "whichever holds it": one
// source answers, none is ErrNotFound, several an *AmbiguousError that is
// a payhook.ErrConflict (409).
func TestLookups(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := openDB(t, dbURL)
		for _, source := range []string{"paddle", "stripe"} {
			applySource(t, db, source,
				billing.Captured{Payment: pay("pay_dup", "ord_dup", 100, "USD")},
				billing.Subscription{Ref: "sub_dup", Status: "active", UpdatedAt: t0})
		}
		applySource(t, db, "stripe",
			billing.Captured{Payment: pay("pay_1", "ord_1", 100, "USD")},
			billing.Subscription{Ref: "sub_1", Status: "active", UpdatedAt: t0})
		lookups := map[string]func(source, ref string) (string, error){
			"payment": func(source, ref string) (string, error) {
				p, err := billing.LookupPayment(ctx, db, source, ref)
				if err != nil {
					return "", err
				}
				if len(p.Postings) != 1 || p.Postings[0].FactKey != "capture:"+ref {
					t.Errorf("LookupPayment(%q, %q) postings = %+v; want its capture", source, ref, p.Postings)
				}
				return p.Source, nil
			},
			"order": func(source, ref string) (string, error) {
				o, err := billing.LookupOrder(ctx, db, source, "ord"+ref[3:])
				if err != nil {
					return "", err
				}
				return o.Source, nil
			},
			"subscription": func(source, ref string) (string, error) {
				s, err := billing.LookupSubscription(ctx, db, source, "sub"+ref[3:])
				if err != nil {
					return "", err
				}
				return s.Source, nil
			},
		}
		for what, lookup := range lookups {
			for _, tc := range []struct {
				source, ref string
				want        string // the source found
				wantErr     error
			}{
				{"", "pay_1", "stripe", nil},
				{"stripe", "pay_1", "stripe", nil},
				{"paddle", "pay_1", "", payhook.ErrNotFound},
				{"", "pay_nope", "", payhook.ErrNotFound},
				{"paddle", "pay_dup", "paddle", nil},
				{"", "pay_dup", "", payhook.ErrConflict},
			} {
				got, err := lookup(tc.source, tc.ref)
				if got != tc.want || !errors.Is(err, tc.wantErr) || (err != nil) != (tc.wantErr != nil) {
					t.Errorf("lookup %s (%q, %q) = %q, %v; want %q, %v", what, tc.source, tc.ref, got, err, tc.want, tc.wantErr)
				}
				var amb *billing.AmbiguousError
				if errors.Is(tc.wantErr, payhook.ErrConflict) &&
					(!errors.As(err, &amb) || amb.What != what || !slices.Equal(amb.Sources, []string{"paddle", "stripe"})) {
					t.Errorf("lookup %s (%q, %q) = %v; want an *AmbiguousError of %s naming paddle and stripe", what, tc.source, tc.ref, err, what)
				}
			}
		}
		if got := payhook.HTTPStatus(&billing.AmbiguousError{What: "payment", Ref: "p", Sources: []string{"a", "b"}}); got != 409 {
			t.Errorf("HTTPStatus(*AmbiguousError) = %d; want 409", got)
		}
	})
}

func TestEventViews(t *testing.T) {
	evs := []*payhook.Event{
		{ID: 1, EventID: "evt_1", Payload: []byte(`{"id":"evt_1"}`)},
		{ID: 2, EventID: "evt_2", Payload: []byte(`not json`)},
	}
	for _, tc := range []struct {
		withPayload bool
		want        []string // each view's payload in JSON, "" when left out
	}{
		{true, []string{`{"id":"evt_1"}`, ""}},
		{false, []string{"", ""}},
	} {
		vs := billing.EventViews(evs, tc.withPayload)
		for i, v := range vs {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				ID      int64           `json:"id"`
				Payload json.RawMessage `json:"payload"`
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if got.ID != evs[i].ID || string(got.Payload) != tc.want[i] {
				t.Errorf("EventViews(withPayload %v)[%d] = %s; want id %d, payload %q", tc.withPayload, i, b, evs[i].ID, tc.want[i])
			}
		}
	}
	if vs := billing.EventViews(nil, true); vs == nil || len(vs) != 0 {
		t.Errorf("EventViews(nil) = %#v; want empty, not nil", vs)
	}
}
