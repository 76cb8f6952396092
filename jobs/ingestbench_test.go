package jobs_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
)

// BenchmarkIngest measures the ack path's store alone, without HTTP or
// the group committer: batches of events (ids in time order, as
// providers' are, and a 1 KiB payload), each stored with its jobs in one
// durable commit, one batch after the other. The group committer's
// batches under load are of the order of 10–20 events on SQLite; a
// commit's fixed cost (its flush, the last page of every index) is shared
// by more events in bigger ones.
func BenchmarkIngest(b *testing.B) {
	payload := []byte(`{"object":"event","data":{"object":{"id":"pi_x","pad":"` + strings.Repeat("x", 1000) + `"}}}`)
	for _, engine := range dbtest.Engines {
		for _, size := range []int{16, 64} {
			b.Run(fmt.Sprintf("%s/batch=%d", engine, size), func(b *testing.B) {
				_, q := setup(b, dbtest.URL(b, engine), jobs.Config{Handlers: &payhook.Mux{}})
				ctx := context.Background()
				run := rand.Text()[:8]
				b.ResetTimer()
				for i := 0; i < b.N; i += size {
					batch := make([]*payhook.Event, 0, size)
					for j := i; j < min(i+size, b.N); j++ {
						batch = append(batch, &payhook.Event{Source: "src", EventID: fmt.Sprintf("evt_%s%09d", run, j),
							Type: "payment.succeeded", ReceivedAt: time.Now(), Payload: payload})
					}
					if _, err := q.Ingest(ctx, batch); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}
