package mapping_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/billing/mapping"
)

// The fuzz targets feed each provider mapping any payload bytes and any
// stored event type. Whatever the input, Read and Facts must not panic,
// must agree, must fail only with payhook.ErrMalformed, must say why they
// ignore an event, and every fact they return must be
// storable: references that pass payhook.CheckRef, amounts within
// payhook.CheckAmount (and not negative), times within payhook.CheckTime,
// the keys each fact is applied by present. Seeds: the provider fixtures
// of testdata/<provider>/ and testdata/fuzz/<target>/ (the hostile cases
// of issue 7: NUL and format characters in ids, amounts near the int64
// limit, "-0", times in milliseconds or beyond year 2200).
//
//	go test -run '^$' -fuzz '^FuzzStripeFacts$' -fuzztime 1m ./billing/mapping

func FuzzStripeFacts(f *testing.F)  { fuzzFacts(f, "stripe") }
func FuzzPaddleFacts(f *testing.F)  { fuzzFacts(f, "paddle") }
func FuzzBilleteFacts(f *testing.F) { fuzzFacts(f, "billete") }
func FuzzCryptoFacts(f *testing.F)  { fuzzFacts(f, "crypto") }

// fuzzFacts seeds f with the provider's fixtures and checks the
// properties of Facts on every input.
func fuzzFacts(f *testing.F, provider string) {
	files, err := filepath.Glob(filepath.Join("testdata", provider, "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		// The stored type is the file's name up to its variant
		// (charge.refunded.charges_api.json: charge.refunded); the payload's
		// own type wins anyway.
		f.Add(b, strings.TrimSuffix(filepath.Base(file), ".json"))
	}
	f.Fuzz(func(t *testing.T, payload []byte, eventType string) {
		checkFacts(t, provider, &payhook.Event{EventID: "evt_fuzz", Type: eventType, OccurredAt: occurred, Payload: payload})
	})
}

// checkFacts maps ev and checks what every mapping promises.
func checkFacts(t *testing.T, provider string, ev *payhook.Event) {
	t.Helper()
	read, err := mapping.Read(provider, ev)
	facts, errFacts := mapping.Facts(provider, ev)
	if !reflect.DeepEqual(facts, read.Facts) || fmt.Sprint(err) != fmt.Sprint(errFacts) {
		t.Fatalf("Facts = %s, %v but Read = %s, %v: not deterministic", show(facts), errFacts, show(read.Facts), err)
	}
	if err == nil && facts == nil && read.Ignored == "" {
		t.Fatal("Read ignores the event without a reason")
	}
	if err != nil {
		if !errors.Is(err, payhook.ErrMalformed) {
			t.Fatalf("Facts error %q does not wrap ErrMalformed", err)
		}
		if facts != nil {
			t.Fatalf("Facts = %s with error %v", show(facts), err)
		}
		return
	}
	if facts != nil && len(facts) == 0 {
		t.Fatal("Facts = empty non-nil slice; want nil to ignore")
	}
	for i, fact := range facts {
		what := fmt.Sprintf("fact %d %T", i, fact)
		checkBounds(t, what, reflect.ValueOf(fact))
		for _, k := range factKeys(t, fact) {
			if k.v == "" {
				t.Errorf("%s: %s is empty in %s", what, k.name, show(facts))
			}
		}
	}
}

// checkBounds walks a fact: every string is a storable reference, every
// int64 an amount within bounds, every time within bounds and in UTC.
func checkBounds(t *testing.T, what string, v reflect.Value) {
	t.Helper()
	if tm, ok := v.Interface().(time.Time); ok {
		if err := payhook.CheckTime(what, tm); err != nil {
			t.Error(err)
		}
		if tm.Location() != time.UTC {
			t.Errorf("%s is in %v, not UTC", what, tm.Location())
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			checkBounds(t, what, v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			checkBounds(t, what+"."+v.Type().Field(i).Name, v.Field(i))
		}
	case reflect.String:
		if err := payhook.CheckRef(what, v.String()); err != nil {
			t.Error(err)
		}
	case reflect.Int64:
		if err := payhook.CheckAmount(what, v.Int()); err != nil {
			t.Error(err)
		}
		if v.Int() < 0 {
			t.Errorf("%s is negative (%d)", what, v.Int())
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			checkBounds(t, fmt.Sprintf("%s[%d]", what, i), v.Index(i))
		}
	}
}

type factKey struct{ name, v string }

// factKeys returns the fields a fact is applied by, which must not be
// empty, and checks its times are set (every mapping falls back to the
// event's time).
func factKeys(t *testing.T, fact billing.Fact) []factKey {
	t.Helper()
	times := func(ts ...time.Time) {
		for _, at := range ts {
			if at.IsZero() {
				t.Errorf("%T has a zero time: %+v", fact, fact)
			}
		}
	}
	switch f := fact.(type) {
	case billing.Captured:
		times(f.Payment.CapturedAt)
		return []factKey{{"Payment.Ref", f.Payment.Ref}, {"Payment.Currency", f.Payment.Currency}}
	case billing.Refunded:
		times(f.At)
		if f.Payment != nil && f.Payment.Ref != f.PaymentRef {
			t.Errorf("Refunded.Payment.Ref %q is not PaymentRef %q", f.Payment.Ref, f.PaymentRef)
		}
		return []factKey{{"PaymentRef", f.PaymentRef}, {"RefundRef", f.RefundRef}, {"Currency", f.Currency}}
	case billing.RefundFailed:
		times(f.At)
		return []factKey{{"PaymentRef", f.PaymentRef}, {"RefundRef", f.RefundRef}}
	case billing.ChargedBack:
		times(f.At)
		if f.Payment != nil && f.Payment.Ref != f.PaymentRef {
			t.Errorf("ChargedBack.Payment.Ref %q is not PaymentRef %q", f.Payment.Ref, f.PaymentRef)
		}
		return []factKey{{"PaymentRef", f.PaymentRef}, {"DisputeRef", f.DisputeRef}}
	case billing.ChargebackWon:
		times(f.At)
		// A win reported as a record of its own (Paddle's
		// chargeback_reverse) names that record instead of the dispute.
		if f.DisputeRef == "" {
			if r := reflect.ValueOf(f).FieldByName("ReversalRef"); r.IsValid() {
				return []factKey{{"PaymentRef", f.PaymentRef}, {"ReversalRef", r.String()}}
			}
		}
		return []factKey{{"PaymentRef", f.PaymentRef}, {"DisputeRef", f.DisputeRef}}
	case billing.OrderPaid:
		times(f.At)
		return []factKey{{"OrderID", f.OrderID}, {"PaymentRef", f.PaymentRef}}
	case billing.Settled:
		times(f.At)
		return []factKey{{"InvoiceRef", f.InvoiceRef}, {"ChainRef", f.ChainRef}, {"Currency", f.Currency}}
	case billing.Subscription:
		times(f.UpdatedAt)
		switch f.Status {
		case "active", "canceled", "ended", "incomplete", "past_due", "unpaid", "paused":
		default:
			t.Errorf("Subscription.Status %q is not a billing subscription status", f.Status)
		}
		return []factKey{{"Ref", f.Ref}}
	}
	// A fact type added later: its bounds are checked, its keys not yet.
	return nil
}
