package providertest

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/signing"
)

// MaxErrorBytes bounds the text of a Verify error: it is logged and sent
// back to whoever posted the delivery, so it must not echo a whole body.
// A reference of payhook.MaxRefBytes quoted with %q fits.
const MaxErrorBytes = 2048

// Fuzz is the fuzz target of a provider: call it from a FuzzVerify of the
// provider's package with the Suite its TestSuite runs. Each input is a
// body, an event id, a unix timestamp and a raw signature header. The
// body is delivered twice: signed correctly (by s.SignID with the id, or
// s.Sign) at the timestamp, and with the raw header in place of the
// signature header. The properties:
//
//   - Verify never panics, and every error wraps payhook.ErrSignature or
//     payhook.ErrMalformed, in at most MaxErrorBytes of valid UTF-8;
//   - a correct signature within the tolerance is never ErrSignature
//     (unless the id is blank: a missing header);
//   - an accepted envelope has an event id, passes payhook.CheckRef (id,
//     type, environment) and payhook.CheckTime, its body is strict JSON
//     (signing.ParseObject) and, when signed correctly, its timestamp is
//     within the window and the tolerance and its SecretID is the
//     signing secret's;
//   - when the verifier is a payhook.HeaderChecker, CheckHeader never
//     panics, fails only with ErrSignature, and never refuses headers
//     whose delivery Verify accepts.
//
// The seeds are s.Event, the hostile cases of Run and the files of
// testdata/fuzz/<target> in the provider's package.
func Fuzz(f *testing.F, s Suite) {
	cur := s.Secrets[1]
	v, err := s.New([]string{s.Secrets[0], cur}, 0)
	if err != nil {
		f.Fatalf("New = %v", err)
	}
	f.Add(s.Event, "evt_fuzz", Now.Unix(), "")
	for _, c := range s.hostileCases(f) {
		id := c.id
		if id == "" {
			id = "evt_fuzz"
		}
		f.Add(c.body, id, Now.Unix(), "")
	}
	f.Fuzz(func(t *testing.T, body []byte, id string, ts int64, header string) {
		at := time.Unix(ts, 0)
		var h http.Header
		if s.SignID != nil {
			h = s.SignID(t, id, body, cur, at)
		} else {
			h = s.Sign(t, body, cur, at)
		}
		env, err := v.Verify(payhook.Delivery{Header: h, Body: body, ReceivedAt: Now})
		checkHeader(t, v, h, err)
		inTolerance := s.NoTimestamp || (!at.Before(payhook.MinTime) && !at.After(payhook.MaxTime) &&
			!at.Before(Now.Add(-signing.DefaultTolerance)) && !at.After(Now.Add(signing.DefaultTolerance)))
		switch {
		case err != nil:
			checkError(t, err)
			if errors.Is(err, payhook.ErrSignature) && inTolerance && (s.SignID == nil || strings.TrimSpace(id) != "") {
				t.Errorf("Verify(correctly signed at %d) = %v; want no signature error", ts, err)
			}
		default:
			checkAccepted(t, body, env)
			if !inTolerance {
				t.Errorf("Verify(signed at %d, received at %d) = %+v; want a tolerance error", ts, Now.Unix(), env)
			}
			if want := signing.Fingerprint(cur); env.SecretID != want {
				t.Errorf("Verify: SecretID = %q; want %q", env.SecretID, want)
			}
			if s.SignID != nil && env.EventID != id {
				t.Errorf("Verify: EventID = %q; want the signed id %q", env.EventID, id)
			}
		}

		raw := h.Clone()
		if header == "" {
			raw.Del(s.Header)
		} else {
			raw.Set(s.Header, header)
		}
		env, err = v.Verify(payhook.Delivery{Header: raw, Body: body, ReceivedAt: Now})
		checkHeader(t, v, raw, err)
		if err != nil {
			checkError(t, err)
		} else {
			checkAccepted(t, body, env)
		}
	})
}

// checkHeader checks the admission pre-check against Verify's verdict.
func checkHeader(t *testing.T, v payhook.Verifier, h http.Header, verifyErr error) {
	t.Helper()
	hc, ok := v.(payhook.HeaderChecker)
	if !ok {
		return
	}
	err := hc.CheckHeader(h, Now)
	switch {
	case err != nil && !errors.Is(err, payhook.ErrSignature):
		t.Errorf("CheckHeader = %v; want ErrSignature", err)
	case err != nil && verifyErr == nil:
		t.Errorf("CheckHeader(%q) = %v, but Verify accepts the delivery", h, err)
	}
}

func checkError(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, payhook.ErrSignature) && !errors.Is(err, payhook.ErrMalformed) {
		t.Errorf("Verify error %v wraps neither ErrSignature nor ErrMalformed", err)
	}
	if msg := err.Error(); len(msg) > MaxErrorBytes || !utf8.ValidString(msg) {
		t.Errorf("Verify error of %d bytes (valid UTF-8: %v): %.200q", len(msg), utf8.ValidString(msg), msg)
	}
}

func checkAccepted(t *testing.T, body []byte, env payhook.Envelope) {
	t.Helper()
	if env.EventID == "" {
		t.Errorf("Verify accepted %+v without an event id", env)
	}
	for _, f := range []struct{ what, value string }{{"event id", env.EventID}, {"type", env.Type}, {"environment", env.Environment}} {
		if err := payhook.CheckRef(f.what, f.value); err != nil {
			t.Errorf("Verify accepted %+v: %v", env, err)
		}
	}
	if err := payhook.CheckTime("occurred_at", env.OccurredAt); err != nil {
		t.Errorf("Verify accepted %+v: %v", env, err)
	}
	if _, err := signing.ParseObject(body); err != nil {
		t.Errorf("Verify accepted a body that is not strict JSON: %v", err)
	}
	if !json.Valid(body) {
		t.Errorf("Verify accepted a body encoding/json finds invalid: %.200q", body)
	}
}
