package payhook_test

import (
	"errors"
	"math"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/payhook/payhook"
)

func TestUnixSeconds(t *testing.T) {
	for _, tc := range []struct {
		n  int64
		ok bool
	}{
		{1_700_000_000, true},
		{payhook.MinTime.Unix(), true},
		{payhook.MaxTime.Unix(), true},
		{payhook.MinTime.Unix() - 1, false},
		{payhook.MaxTime.Unix() + 1, false},
		{1_700_000_000_000, false},  // milliseconds
		{1001796109157, false},      // the ~292-years-ahead bypass
		{10_000_000_000_000, false}, // out of PostgreSQL's range
		{0, false},
		{-1, false},
		{math.MaxInt64, false},
		{math.MinInt64, false},
	} {
		_, err := payhook.UnixSeconds("t", tc.n)
		if (err == nil) != tc.ok {
			t.Errorf("UnixSeconds(%d) = %v, want ok %v", tc.n, err, tc.ok)
		}
		if err != nil && !errors.Is(err, payhook.ErrMalformed) {
			t.Errorf("UnixSeconds(%d) = %v, want ErrMalformed", tc.n, err)
		}
	}
}

func TestCheckTime(t *testing.T) {
	for _, tc := range []struct {
		t  time.Time
		ok bool
	}{
		{time.Time{}, true},
		{time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), true},
		{time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC), false},
		{time.Date(2200, 1, 1, 0, 0, 1, 0, time.UTC), false},
		{time.Unix(10_000_000_000_000, 0), false},
	} {
		if err := payhook.CheckTime("t", tc.t); (err == nil) != tc.ok {
			t.Errorf("CheckTime(%v) = %v, want ok %v", tc.t, err, tc.ok)
		}
	}
}

func TestCheckAmount(t *testing.T) {
	for _, tc := range []struct {
		n  int64
		ok bool
	}{
		{0, true}, {1000, true}, {-1000, true},
		{payhook.MaxAmount, true}, {-payhook.MaxAmount, true},
		{payhook.MaxAmount + 1, false}, {-payhook.MaxAmount - 1, false},
		{math.MaxInt64, false}, {math.MinInt64, false},
	} {
		if err := payhook.CheckAmount("amount", tc.n); (err == nil) != tc.ok {
			t.Errorf("CheckAmount(%d) = %v, want ok %v", tc.n, err, tc.ok)
		}
	}
}

func TestCheckRef(t *testing.T) {
	for _, tc := range []struct {
		s  string
		ok bool
	}{
		{"", true},
		{"pi_3MtwBwLkdIwHu7ix28a3tqPa", true},
		{"txn_01h04vsc0qhwtsbsxh3422wjs4", true},
		{"ñandú-42", true},
		{"pi_x\x00y", false},
		{"pi_x\ny", false},
		{"pi_\u2028x", false},
		{"pi_\u202ex", false},
		{"pi_\u200bx", false},
		{"pi_\ufffdx", false},
		{"pi_\xffx", false},
		{string(make([]byte, payhook.MaxRefBytes+1)), false},
	} {
		err := payhook.CheckRef("ref", tc.s)
		if (err == nil) != tc.ok {
			t.Errorf("CheckRef(%q) = %v, want ok %v", tc.s, err, tc.ok)
		}
		if err != nil && !errors.Is(err, payhook.ErrMalformed) {
			t.Errorf("CheckRef(%q) = %v, want ErrMalformed", tc.s, err)
		}
	}
}

// TestCheckRefASCII checks CheckRef's fast path for printable ASCII
// against the rune rule: every byte, every ASCII, control, format and
// separator rune, and one rune in 97 of the others.
func TestCheckRefASCII(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0x80 && r%97 != 0 && !unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Cc) {
			continue // a sample of the runes CheckRef decodes
		}
		s := "pi_" + string(r) + "x"
		want := utf8.ValidRune(r) && !unicode.IsControl(r) && !unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) && r != utf8.RuneError
		if err := payhook.CheckRef("ref", s); (err == nil) != want {
			t.Errorf("CheckRef(%q) = %v, want ok %v", s, err, want)
		}
	}
	for b := 0; b < 256; b++ {
		s := "pi_" + string([]byte{byte(b)})
		want := b >= 0x20 && b < 0x7f
		if err := payhook.CheckRef("ref", s); (err == nil) != want {
			t.Errorf("CheckRef(%q) = %v, want ok %v", s, err, want)
		}
	}
}

func BenchmarkCheckRef(b *testing.B) {
	for b.Loop() {
		_ = payhook.CheckRef("event id", "evt_3MtwBwLkdIwHu7ix28a3tqPa")
	}
}

func TestStorable(t *testing.T) {
	for in, want := range map[string]string{
		"plain":       "plain",
		"a\x00b":      "a\uFFFDb",
		"a\xffb":      "a\uFFFDb",
		"pi_x\x00y é": "pi_x\uFFFDy é",
	} {
		if got := payhook.Storable(in); got != want {
			t.Errorf("Storable(%q) = %q, want %q", in, got, want)
		}
	}
}
