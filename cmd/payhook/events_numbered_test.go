package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/payhook/payhook/internal/dbtest"
)

// TestEventsShowNumberedProvider: a source whose provider numbers its
// events (their ids are numbers, as payhook's row ids are) may give an
// event the number that is another event's row id; show refuses that
// number and names how to give each event. Following that advice shows
// the event named: the advice must not name a number that is ambiguous
// in its turn.
func TestEventsShowNumberedProvider(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ids := seedEvents(t, dbURL, [2]string{"h", "evt_a"})
		r1 := fmt.Sprint(ids["h/evt_a"])
		for k, v := range seedEvents(t, dbURL, [2]string{"h", r1}) {
			ids[k] = v
		}
		r2 := fmt.Sprint(ids["h/"+r1])
		for k, v := range seedEvents(t, dbURL, [2]string{"h", r2}) {
			ids[k] = v
		}
		env := map[string]string{"PAYHOOK_DB": dbURL}
		code, _, stderr := run(t, env, "events", "show", r1)
		if code != 2 || !strings.Contains(stderr, "is both") {
			t.Fatalf("events show %s: exit %d, %s; want it refused as ambiguous", r1, code, stderr)
		}
		i := strings.Index(stderr, "give ")
		advice := strings.Fields(strings.NewReplacer(",", " ", "for the first", "|", "for the second", "|").Replace(stderr[i+len("give "):]))
		// advice: first's args | second's args |
		var forms [][]string
		var cur []string
		for _, w := range advice {
			if w == "|" {
				forms = append(forms, cur)
				cur = nil
				continue
			}
			cur = append(cur, w)
		}
		if len(forms) != 2 {
			t.Fatalf("advice %q: want two forms", stderr)
		}
		for i, want := range []string{"evt_a", r1} {
			code, stdout, stderr := run(t, env, append([]string{"events", "show"}, forms[i]...)...)
			if code != 0 || !strings.Contains(stdout, want) {
				t.Errorf("events show %s (as advised): exit %d, %s%s; want event %s of h", strings.Join(forms[i], " "), code, stdout, stderr, want)
			}
		}
	})
}
