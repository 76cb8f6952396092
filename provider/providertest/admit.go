package providertest

import (
	"errors"
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
