// Package providertest is the conformance suite every payhook provider
// verifier passes: valid and rotated secrets, wrong secrets, tampered
// bodies, missing and malformed headers, timestamp tolerance, unreadable
// signed bodies and empty secrets.
package providertest

import (
	"errors"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/signing"
)

// Now is the fixed receipt time of every delivery the suite makes.
var Now = time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)

// Suite describes one provider to Run.
type Suite struct {
	// New builds the provider's verifier for secrets and tolerance.
	New func(secrets []string, tolerance time.Duration) (payhook.Verifier, error)
	// Sign returns the headers the provider would send with body, signed
	// with secret at time at. It must not use the code under test.
	Sign func(t *testing.T, body []byte, secret string, at time.Time) http.Header
	// Secrets are three distinct valid secrets in the provider's format.
	Secrets [3]string
	// Event is a valid event body; Want is its envelope, SecretID aside.
	Event []byte
	Want  payhook.Envelope
	// Incomplete is a JSON object the provider must reject with
	// payhook.ErrMalformed, usually one without an event id.
	Incomplete []byte
	// Header is the signature header the suite deletes and corrupts.
	Header string
	// NoTimestamp says the provider signs no timestamp, so the tolerance
	// cases are skipped.
	NoTimestamp bool

	// IDField, TypeField and TimeField name the top-level fields of Event
	// that hold the event id, its type and its time; each may be empty
	// when the provider reads no such field (the id of a Standard
	// Webhooks event is a header, see SignID). The hostile cases derive
	// bodies from Event by changing them: duplicated, in another case,
	// with control characters, out of range.
	IDField, TypeField, TimeField string
	// ReadFields are the other top-level fields the envelope reads (such
	// as livemode); a duplicate or a case variant of them is refused too.
	ReadFields []string
	// SignID, if set, signs like Sign but with event id id in a signed
	// header, for providers that read the id from one. With IDField set
	// too, the suite puts the same id in both.
	SignID func(t *testing.T, id string, body []byte, secret string, at time.Time) http.Header
	// Envelope, if set, is the provider's adapter.Adapter.Envelope: it
	// must read Event as Verify does (Want, SecretID aside) and refuse
	// with payhook.ErrMalformed every signed body Verify refuses so.
	Envelope func(body []byte) (payhook.Envelope, error)
}

// Run runs the suite against s.
func Run(t *testing.T, s Suite) {
	t.Helper()
	old, cur, removed := s.Secrets[0], s.Secrets[1], s.Secrets[2]
	both := s.mustNew(t, []string{old, cur}, 0)

	t.Run("valid", func(t *testing.T) {
		t.Parallel()
		v := s.mustNew(t, []string{cur}, 0)
		got, err := v.Verify(s.delivery(t, s.Event, cur, Now.Add(-30*time.Second)))
		if err != nil {
			t.Fatalf("Verify = %v; want nil", err)
		}
		want := s.Want
		want.SecretID = signing.Fingerprint(cur)
		if got != want {
			t.Errorf("Verify = %+v; want %+v", got, want)
		}
		if s.Envelope != nil {
			if got, err := s.Envelope(s.Event); err != nil || got != s.Want {
				t.Errorf("Envelope = %+v, %v; want %+v", got, err, s.Want)
			}
		}
	})

	t.Run("rotation", func(t *testing.T) {
		t.Parallel()
		for _, secret := range []string{old, cur} {
			got, err := both.Verify(s.delivery(t, s.Event, secret, Now))
			if err != nil {
				t.Fatalf("Verify(signed with %s) = %v; want nil", signing.Fingerprint(secret), err)
			}
			if want := signing.Fingerprint(secret); got.SecretID != want {
				t.Errorf("SecretID = %q; want %q", got.SecretID, want)
			}
		}
		_, err := both.Verify(s.delivery(t, s.Event, removed, Now))
		if !errors.Is(err, payhook.ErrSignature) {
			t.Errorf("Verify(signed with a removed secret) = %v; want ErrSignature", err)
		}
	})

	tamper := func(d payhook.Delivery) payhook.Delivery {
		b := append([]byte(nil), d.Body...)
		b[len(b)/2] ^= 0x01
		d.Body = b
		return d
	}
	signatureCases := []struct {
		name string
		d    payhook.Delivery
	}{
		{"wrong secret", s.delivery(t, s.Event, removed, Now)},
		{"tampered body", tamper(s.delivery(t, s.Event, cur, Now))},
		{"missing header", s.withHeader(s.delivery(t, s.Event, cur, Now), "")},
		{"malformed header", s.withHeader(s.delivery(t, s.Event, cur, Now), "garbage")},
		{"junk header", s.withHeader(s.delivery(t, s.Event, cur, Now), "t=1,v1=zz;ts=1;h1=zz,sha256=zz v1,!!")},
		{"no headers", payhook.Delivery{Body: s.Event, ReceivedAt: Now}},
		// The signature is checked before the body is parsed.
		{"unsigned junk body", func() payhook.Delivery {
			d := s.delivery(t, s.Event, cur, Now)
			d.Body = []byte("not json")
			return d
		}()},
	}
	if !s.NoTimestamp {
		signatureCases = append(signatureCases, []struct {
			name string
			d    payhook.Delivery
		}{
			{"too old", s.delivery(t, s.Event, cur, Now.Add(-6*time.Minute))},
			{"too far in the future", s.delivery(t, s.Event, cur, Now.Add(6*time.Minute))},
			{"very old", s.delivery(t, s.Event, cur, time.Unix(1_000_000_000, 0))},
			// Beyond ~292 years a time.Duration overflows: an age computed
			// by subtraction wraps and passes any tolerance.
			{"far future", s.delivery(t, s.Event, cur, time.Unix(1_001_796_109_157, 0))},
			{"milliseconds", s.delivery(t, s.Event, cur, time.Unix(Now.UnixMilli(), 0))},
			{"before 2000", s.delivery(t, s.Event, cur, time.Unix(-1, 0))},
		}...)
	}
	for _, tc := range signatureCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := both.Verify(tc.d)
			if !errors.Is(err, payhook.ErrSignature) {
				t.Errorf("Verify = %v; want ErrSignature", err)
			}
		})
	}

	if !s.NoTimestamp {
		t.Run("within tolerance", func(t *testing.T) {
			t.Parallel()
			for _, skew := range []time.Duration{-4 * time.Minute, 4 * time.Minute} {
				if _, err := both.Verify(s.delivery(t, s.Event, cur, Now.Add(skew))); err != nil {
					t.Errorf("Verify(skew %v) = %v; want nil", skew, err)
				}
			}
		})
		t.Run("custom tolerance", func(t *testing.T) {
			t.Parallel()
			v := s.mustNew(t, []string{cur}, time.Hour)
			if _, err := v.Verify(s.delivery(t, s.Event, cur, Now.Add(-50*time.Minute))); err != nil {
				t.Errorf("Verify(50m old, 1h tolerance) = %v; want nil", err)
			}
			if _, err := v.Verify(s.delivery(t, s.Event, cur, Now.Add(-61*time.Minute))); !errors.Is(err, payhook.ErrSignature) {
				t.Errorf("Verify(61m old, 1h tolerance) = %v; want ErrSignature", err)
			}
		})
		t.Run("huge tolerance", func(t *testing.T) {
			t.Parallel()
			// Even a tolerance of centuries admits no timestamp outside
			// payhook.MinTime..MaxTime.
			v := s.mustNew(t, []string{cur}, math.MaxInt64)
			for _, at := range []time.Time{time.Unix(1_001_796_109_157, 0), time.Unix(Now.UnixMilli(), 0), time.Unix(-1, 0)} {
				if _, err := v.Verify(s.delivery(t, s.Event, cur, at)); !errors.Is(err, payhook.ErrSignature) {
					t.Errorf("Verify(timestamp %d, tolerance %v) = %v; want ErrSignature", at.Unix(), time.Duration(math.MaxInt64), err)
				}
			}
			if _, err := v.Verify(s.delivery(t, s.Event, cur, Now.Add(-20*365*24*time.Hour))); err != nil {
				t.Errorf("Verify(20 years old, tolerance %v) = %v; want nil", time.Duration(math.MaxInt64), err)
			}
		})
	}

	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"array", []byte(`[{"id":"evt_1"}]`)},
		{"string", []byte(`"evt_1"`)},
		{"null", []byte(`null`)},
		{"not json", []byte(`id=evt_1`)},
		{"truncated object", []byte(`{"id":"evt_1"`)},
		{"incomplete object", s.Incomplete},
	} {
		t.Run("malformed "+tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := both.Verify(s.delivery(t, tc.body, cur, Now))
			if !errors.Is(err, payhook.ErrMalformed) {
				t.Errorf("Verify(%s) = %v; want ErrMalformed", tc.body, err)
			}
			s.refusedEnvelope(t, tc.body)
		})
	}

	s.hostile(t, both, cur)

	t.Run("config", func(t *testing.T) {
		t.Parallel()
		cases := map[string][]string{
			"no secrets":   nil,
			"empty secret": {""},
			"one empty":    {cur, ""},
		}
		for name, secrets := range cases {
			if _, err := s.New(secrets, 0); !errors.Is(err, payhook.ErrConfig) {
				t.Errorf("New(%s) = %v; want ErrConfig", name, err)
			}
		}
		if !s.NoTimestamp {
			if _, err := s.New([]string{cur}, -time.Second); !errors.Is(err, payhook.ErrConfig) {
				t.Errorf("New(negative tolerance) = %v; want ErrConfig", err)
			}
		}
	})
}

// refusedEnvelope checks that s.Envelope, if set, refuses body with
// payhook.ErrMalformed.
func (s Suite) refusedEnvelope(t *testing.T, body []byte) {
	t.Helper()
	if s.Envelope == nil {
		return
	}
	if env, err := s.Envelope(body); !errors.Is(err, payhook.ErrMalformed) {
		t.Errorf("Envelope(%q) = %+v, %v; want ErrMalformed", abbrev(body), env, err)
	}
}

func (s Suite) mustNew(t *testing.T, secrets []string, tol time.Duration) payhook.Verifier {
	t.Helper()
	v, err := s.New(secrets, tol)
	if err != nil {
		t.Fatalf("New = %v; want nil", err)
	}
	return v
}

func (s Suite) delivery(t *testing.T, body []byte, secret string, at time.Time) payhook.Delivery {
	t.Helper()
	return payhook.Delivery{Header: s.Sign(t, body, secret, at), Body: body, ReceivedAt: Now}
}

// withHeader replaces the signature header; "" deletes it.
func (s Suite) withHeader(d payhook.Delivery, value string) payhook.Delivery {
	h := d.Header.Clone()
	if value == "" {
		h.Del(s.Header)
	} else {
		h.Set(s.Header, value)
	}
	d.Header = h
	return d
}
