package mapping_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/billing/mapping"
)

// BenchmarkRead maps provider fixtures of testdata/, as every processed
// event does: Stripe's checkout.session.completed alone, then each
// provider's fixtures in turn (one op is one event).
func BenchmarkRead(b *testing.B) {
	one, err := os.ReadFile(filepath.Join("testdata", "stripe", "checkout.session.completed.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("stripe/checkout.session.completed", func(b *testing.B) {
		ev := &payhook.Event{EventID: "evt_bench", Type: "checkout.session.completed", OccurredAt: occurred, Payload: one}
		b.SetBytes(int64(len(one)))
		for b.Loop() {
			if _, err := mapping.Read("stripe", ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, provider := range []string{"stripe", "paddle"} {
		files, err := filepath.Glob(filepath.Join("testdata", provider, "*.json"))
		if err != nil || len(files) == 0 {
			b.Fatalf("fixtures of %s: %v", provider, err)
		}
		var evs []*payhook.Event
		for _, f := range files {
			payload, err := os.ReadFile(f)
			if err != nil {
				b.Fatal(err)
			}
			typ := strings.TrimSuffix(filepath.Base(f), ".json")
			evs = append(evs, &payhook.Event{EventID: "evt_bench", Type: typ, OccurredAt: occurred, Payload: payload})
		}
		b.Run(provider+"/fixtures", func(b *testing.B) {
			i := 0
			for b.Loop() {
				mapping.Read(provider, evs[i%len(evs)]) // some fixtures are meant to fail
				i++
			}
		})
	}
}
