package signing_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/signing"
)

// FuzzParams: Params never panics, fails only with ErrSignature, and
// what it returns is trimmed, free of the separator, and parses again to
// the same values.
func FuzzParams(f *testing.F) {
	for _, s := range []string{"t=1,v1=a,v1=b,,v0=c", "ts=1;h1=ab", " = ", "=", "a==b", "t=1001796109157,v1=00", "\x00=\xff", "t=1,\u2028v1=a"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, header string, semicolon bool) {
		sep := ","
		if semicolon {
			sep = ";"
		}
		got, err := signing.Params(header, sep)
		if err != nil {
			if !errors.Is(err, payhook.ErrSignature) {
				t.Fatalf("Params(%q) = %v; want ErrSignature", header, err)
			}
			return
		}
		var again []string
		for k, vs := range got {
			for _, v := range vs {
				for _, s := range []string{k, v} {
					if strings.Contains(s, sep) || strings.TrimSpace(s) != s {
						t.Fatalf("Params(%q): %q is not a trimmed value without %q", header, s, sep)
					}
				}
				again = append(again, k+"="+v)
			}
		}
		if len(again) == 0 {
			return
		}
		re, err := signing.Params(strings.Join(again, sep), sep)
		if err != nil || !sameValues(got, re) {
			t.Fatalf("Params(Params(%q) joined) = %v, %v; want %v", header, re, err, got)
		}
	})
}

// sameValues compares two parsed headers, ignoring the order of keys
// (the joined header lists them in map order).
func sameValues(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb := b[k]
		if len(va) != len(vb) {
			return false
		}
		for i := range va {
			if va[i] != vb[i] {
				return false
			}
		}
	}
	return true
}

// FuzzKeyValueHeader fuzzes the Stripe-style scheme: a raw header, and a
// header signed correctly over a fuzzed timestamp text. Verify never
// panics and fails only with ErrSignature; it accepts a signed header
// only when the timestamp is unix seconds within payhook's window and
// the tolerance, and a raw header only when it carries a correct
// signature.
func FuzzKeyValueHeader(f *testing.F) {
	for _, c := range []struct{ header, ts string }{
		{"t=1768471200,v1=00", "1768471200"},
		{"t=1001796109157,v1=00", "1001796109157"},
		{"t=1768471200000,v1=00", "1768471200000"},
		{"t=-9223372036854775808,v1=", "-9223372036854775808"},
		{"t=1768471200,t=1768471200,v1=zz", " 1768471200 "},
		{"v1=00,v1=00,t", "+1768471200"},
		{"t=1768471200,v1=" + strings.Repeat("0", 64), "01768471200"},
	} {
		f.Add(c.header, c.ts, []byte(`{"id":"evt_1"}`))
	}
	scheme := signing.KeyValueHeader{Header: "Sig", Sep: ",", TimestampKey: "t", SignatureKey: "v1", Joiner: '.'}
	key := []byte("fuzz-secret")
	secrets, _ := signing.ParseSecrets([]string{"other", string(key)})
	received := time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)
	tol := 5 * time.Minute
	f.Fuzz(func(t *testing.T, header, ts string, body []byte) {
		verify := func(value string) (signing.Secret, error) {
			h := http.Header{}
			h.Set("Sig", value)
			s, err := scheme.Verify(payhook.Delivery{Header: h, Body: body, ReceivedAt: received}, secrets, tol)
			if err != nil && !errors.Is(err, payhook.ErrSignature) {
				t.Fatalf("Verify(%q) = %v; want ErrSignature", value, err)
			}
			return s, err
		}
		if s, err := verify(header); err == nil {
			if s.ID != signing.Fingerprint(string(key)) && s.ID != signing.Fingerprint("other") {
				t.Fatalf("Verify(%q) matched %q", header, s.ID)
			}
		}
		mac := hex.EncodeToString(signing.HMACSHA256(key, []byte(ts), []byte("."), body))
		_, err := verify("t=" + ts + ",v1=" + mac)
		n, perr := strconv.ParseInt(strings.TrimSpace(ts), 10, 64)
		// Params splits on "," and trims, so only a trimmed text
		// without one reaches the MAC as it was signed.
		plain := !strings.Contains(ts, ",") && strings.TrimSpace(ts) == ts
		ok := plain && perr == nil && n >= received.Add(-tol).Unix() && n <= received.Add(tol).Unix()
		if ok != (err == nil) {
			t.Fatalf("Verify(signed at %q) = %v; want accepted: %v", ts, err, ok)
		}
	})
}

// FuzzCheckTimestamp compares CheckTimestamp with exact arithmetic: a
// timestamp is accepted exactly when it is within payhook's window and
// within the tolerance of the receipt time, whatever the magnitudes.
func FuzzCheckTimestamp(f *testing.F) {
	now := time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC).Unix()
	for _, c := range [][3]int64{
		{1_001_796_109_157, now, int64(5 * time.Minute)},
		{now * 1000, now, int64(5 * time.Minute)},
		{now, now, 1<<63 - 1},
		{-1 << 63, now, 1<<63 - 1},
		{1<<63 - 1, now, 1<<63 - 1},
		{now + 300, now, int64(5 * time.Minute)},
		{now - 301, now, int64(5 * time.Minute)},
	} {
		f.Add(c[0], c[1], c[2])
	}
	f.Fuzz(func(t *testing.T, ts, recv, tol int64) {
		if tol < 0 {
			tol = -(tol + 1)
		}
		recv %= 1 << 36 // any receipt time within ±2000 years of 1970
		err := signing.CheckTimestamp(time.Unix(ts, 0), time.Unix(recv, 0), time.Duration(tol))
		if err != nil && !errors.Is(err, payhook.ErrSignature) {
			t.Fatalf("CheckTimestamp = %v; want ErrSignature", err)
		}
		age := new(big.Int).Mul(new(big.Int).Sub(big.NewInt(recv), big.NewInt(ts)), big.NewInt(int64(time.Second)))
		within := new(big.Int).Abs(age).Cmp(big.NewInt(tol)) <= 0
		inWindow := ts >= payhook.MinTime.Unix() && ts <= payhook.MaxTime.Unix()
		zero := time.Unix(recv, 0).IsZero()
		if want := within && inWindow && !zero; want != (err == nil) {
			t.Fatalf("CheckTimestamp(%d, received %d, tolerance %v) = %v; want accepted: %v", ts, recv, time.Duration(tol), err, want)
		}
	})
}

// FuzzParseUnix: a header timestamp is accepted exactly when it is
// decimal unix seconds within payhook's window.
func FuzzParseUnix(f *testing.F) {
	for _, s := range []string{"1768471200", "1001796109157", "1768471200000", "-1", "0", " 946684800", "7258118400 ", "+7258118400", "1e9", "0x10", "٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := signing.ParseUnix(s)
		n, perr := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		want := perr == nil && n >= payhook.MinTime.Unix() && n <= payhook.MaxTime.Unix()
		if want != (err == nil) {
			t.Fatalf("ParseUnix(%q) = %v, %v; want accepted: %v", s, got, err, want)
		}
		if err != nil && !errors.Is(err, payhook.ErrSignature) {
			t.Fatalf("ParseUnix(%q) = %v; want ErrSignature", s, err)
		}
		if err == nil && got.Unix() != n {
			t.Fatalf("ParseUnix(%q) = %v; want %d", s, got, n)
		}
	})
}

// FuzzParseObject: ParseObject never panics, fails only with
// ErrMalformed in a short message, accepts only what encoding/json finds
// valid, and what payhook reads from an accepted body is what an
// application decoding it with encoding/json reads, for the fields
// envelopes use at the top level and one level down.
func FuzzParseObject(f *testing.F) {
	for _, s := range []string{
		`{"id":"evt_a","id":"evt_b"}`,
		`{"id":"evt_a","ID":"evt_b"}`,
		"{\"id\":\"evt_\xff\"}",
		`{"id":"evt_\ud800"}`,
		`{"id":"evt_\ud83d\ude00","type":"a.b","created":1700000000,"livemode":true}`,
		`{"id":7,"type":"x","created":10000000000000}`,
		`{"id":"evt\u2028","type":"\u202e"}`,
		`{"data":{"object":{"id":"pi_1","Id":"pi_2"}}}`,
		`{"data":{"object":{"id":"pi_1","amount":1,"amount":2}}}`,
		`{"occurred_at":"2026-01-15T09:59:00Z","kelvin":1,"\u212aelvin":2}`,
		`{"a":1} {"a":2}`,
		` {"a":[1,{"b":null}]} `,
		`{"a":[{"id":"x"},{"id":"y","Id":"z"}],"data":[{}]}`,
		`{"a":-0,"data":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		o, err := signing.ParseObject(body)
		if err != nil {
			if !errors.Is(err, payhook.ErrMalformed) {
				t.Fatalf("ParseObject = %v; want ErrMalformed", err)
			}
			if msg := err.Error(); len(msg) > 512 || !utf8.ValidString(msg) {
				t.Fatalf("ParseObject error of %d bytes: %.200q", len(msg), msg)
			}
			return
		}
		if !utf8.Valid(body) || !json.Valid(body) {
			t.Fatalf("ParseObject accepted %q, which is not valid UTF-8 JSON", body)
		}
		var std struct {
			ID, Type, Name string
			Data           struct{ Object struct{ ID, Name string } }
		}
		stdErr := json.Unmarshal(body, &std)
		compare := func(o signing.Object, field, stdValue string) {
			got, err := o.String(field)
			if err != nil {
				if !errors.Is(err, payhook.ErrMalformed) {
					t.Fatalf("String(%q) = %v; want ErrMalformed", field, err)
				}
				return
			}
			if stdErr == nil && got != stdValue {
				t.Fatalf("%q: payhook reads %q, encoding/json %q, in %q", field, got, stdValue, body)
			}
		}
		compare(o, "id", std.ID)
		compare(o, "type", std.Type)
		compare(o, "name", std.Name)
		if data, err := o.Object("data"); err == nil {
			if obj, err := data.Object("object"); err == nil {
				compare(obj, "id", std.Data.Object.ID)
				compare(obj, "name", std.Data.Object.Name)
			}
		}
		// Every reader either reads or fails with ErrMalformed.
		for _, field := range []string{"id", "type", "created", "livemode", "occurred_at", "data", "a"} {
			_, e1 := o.ID(field)
			_, _, e2 := o.Bool(field)
			_, e3 := o.Time(field)
			_, e4 := o.RequiredString(field)
			_, e5 := o.Object(field)
			_, e6 := o.Kind(field)
			_, e7 := o.Number(field)
			list, e8 := o.Objects(field)
			errs := []error{e1, e2, e3, e4, e5, e6, e7, e8}
			for _, elem := range list {
				_, e := elem.String("id")
				errs = append(errs, e)
			}
			for _, e := range errs {
				if e != nil && !errors.Is(e, payhook.ErrMalformed) {
					t.Fatalf("reading %q: %v; want ErrMalformed", field, e)
				}
			}
			if tm, err := o.Time(field); err == nil {
				if err := payhook.CheckTime(field, tm); err != nil {
					t.Fatalf("Time(%q) = %v outside the window", field, tm)
				}
			}
		}
	})
}
