package providertest

import (
	"errors"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/payhook/payhook"
)

// RunHeaderCheck checks the provider's payhook.HeaderChecker, the check
// the receiver makes before it reads a body: it accepts every delivery the
// suite signs (with the current secret and with a rotated one), and
// refuses with payhook.ErrSignature a missing or garbled signature header,
// a signature cut short and, unless NoTimestamp, a timestamp outside the
// tolerance or in milliseconds.
func RunHeaderCheck(t *testing.T, s Suite) {
	t.Helper()
	old, cur := s.Secrets[0], s.Secrets[1]
	check := func(t *testing.T, secrets []string) payhook.HeaderChecker {
		t.Helper()
		hc, ok := s.mustNew(t, secrets, 0).(payhook.HeaderChecker)
		if !ok {
			t.Fatal("the verifier is not a payhook.HeaderChecker: the receiver would read every body before refusing it")
		}
		return hc
	}
	t.Run("accepts what verifies", func(t *testing.T) {
		t.Parallel()
		for _, secret := range []string{old, cur} {
			d := s.delivery(t, s.Event, secret, Now.Add(-30*time.Second))
			if _, err := s.mustNew(t, []string{old, cur}, 0).Verify(d); err != nil {
				t.Fatalf("Verify = %v; the suite's delivery should verify", err)
			}
			if err := check(t, []string{old, cur}).CheckHeader(d.Header, d.ReceivedAt); err != nil {
				t.Errorf("CheckHeader of a delivery that verifies = %v; want nil", err)
			}
		}
	})
	valid := s.delivery(t, s.Event, cur, Now.Add(-30*time.Second))
	value := valid.Header.Get(s.Header)
	cases := []struct {
		name string
		d    payhook.Delivery
	}{
		{"missing header", s.withHeader(valid, "")},
		{"garbage header", s.withHeader(valid, "garbage")},
		{"signature cut short", s.withHeader(valid, cutShort(value))},
	}
	if !s.NoTimestamp {
		cases = append(cases,
			struct {
				name string
				d    payhook.Delivery
			}{"too old", s.delivery(t, s.Event, cur, Now.Add(-time.Hour))},
			struct {
				name string
				d    payhook.Delivery
			}{"too far ahead", s.delivery(t, s.Event, cur, Now.Add(time.Hour))},
			struct {
				name string
				d    payhook.Delivery
			}{"milliseconds", s.delivery(t, s.Event, cur, time.Unix(Now.UnixMilli(), 0))},
		)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if err := check(t, []string{cur}).CheckHeader(tc.d.Header, tc.d.ReceivedAt); !errors.Is(err, payhook.ErrSignature) {
				t.Errorf("CheckHeader = %v; want an error wrapping ErrSignature", err)
			}
		})
	}
}

// cutShort drops the last 4 characters of the longest hex or base64 run
// of a signature header's value: its signature.
func cutShort(value string) string {
	longest := []int{0, 0}
	for _, m := range regexp.MustCompile(`[A-Za-z0-9+/=]+`).FindAllStringIndex(value, -1) {
		if m[1]-m[0] > longest[1]-longest[0] {
			longest = m
		}
	}
	return value[:longest[1]-4] + value[longest[1]:]
}

// FuzzHeaderCheck fuzzes the provider's payhook.HeaderChecker against its
// Verify over deliveries signed at any time, whose signature header is
// kept, replaced by the fuzzed text, or has the text added after or
// before it: CheckHeader never refuses a delivery that Verify accepts,
// and every error it returns wraps payhook.ErrSignature.
func FuzzHeaderCheck(f *testing.F, s Suite) {
	cur := s.Secrets[1]
	v, err := s.New([]string{s.Secrets[0], cur}, 0)
	if err != nil {
		f.Fatalf("New = %v", err)
	}
	hc, ok := v.(payhook.HeaderChecker)
	if !ok {
		f.Fatal("the verifier is not a payhook.HeaderChecker")
	}
	for mode, extra := range []string{"", "garbage", ",v0=00", " ; ", "v1,AAAA", "t=1", ""} {
		f.Add(s.Event, "evt_fuzz", Now.Unix(), extra, uint8(mode%4))
	}
	f.Add(s.Event, "evt_fuzz", Now.Add(-time.Hour).Unix(), "", uint8(0))
	f.Add(s.Event, "evt_fuzz", Now.UnixMilli(), "", uint8(0))
	f.Fuzz(func(t *testing.T, body []byte, id string, ts int64, text string, mode uint8) {
		at := time.Unix(ts, 0)
		var h http.Header
		if s.SignID != nil {
			h = s.SignID(t, id, body, cur, at)
		} else {
			h = s.Sign(t, body, cur, at)
		}
		signed := h.Get(s.Header)
		switch mode % 4 {
		case 1:
			h.Set(s.Header, text)
		case 2:
			h.Set(s.Header, signed+text)
		case 3:
			h.Set(s.Header, text+signed)
		}
		_, verr := v.Verify(payhook.Delivery{Header: h, Body: body, ReceivedAt: Now})
		cerr := hc.CheckHeader(h, Now)
		if cerr != nil && !errors.Is(cerr, payhook.ErrSignature) {
			t.Errorf("CheckHeader = %v; want nil or an error wrapping ErrSignature", cerr)
		}
		if verr == nil && cerr != nil {
			t.Errorf("CheckHeader = %v for a delivery that Verify accepts (header %q)", cerr, h.Get(s.Header))
		}
	})
}
