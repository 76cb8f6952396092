package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/store"
)

// BenchmarkProcess measures processing throughput: b.N stored events, each
// with its job, processed by a started queue (claim, handler, mark, commit
// per event) until none is left waiting.
func BenchmarkProcess(b *testing.B) {
	for _, engine := range dbtest.Engines {
		b.Run(engine, func(b *testing.B) {
			mux := &payhook.Mux{}
			mux.HandleFunc("payment.succeeded", effect)
			db, q := setup(b, dbtest.URL(b, engine), jobs.Config{Handlers: mux, FetchCooldown: time.Millisecond})
			benchProcess(b, db, q)
		})
	}
}

// BenchmarkProcessFetch is BenchmarkProcess with a Fetch that answers
// after fetchLatency, as a provider's API does (Stripe's, from a server
// near it, in tens of milliseconds): each event is then processed alone,
// its resource read outside the transaction, and how many are read at once
// (the Workers) is what bounds the rate. workers=0 is the default.
func BenchmarkProcessFetch(b *testing.B) {
	const fetchLatency = 50 * time.Millisecond
	for _, engine := range dbtest.Engines {
		for _, workers := range []int{0, 4, 20} {
			b.Run(fmt.Sprintf("%s/workers=%d", engine, workers), func(b *testing.B) {
				mux := &payhook.Mux{}
				mux.HandleFunc("payment.succeeded", effect)
				fetch := func(ctx context.Context, _ *payhook.Event) ([]byte, error) {
					select {
					case <-time.After(fetchLatency):
						return []byte(`{}`), nil
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
				db, q := setup(b, dbtest.URL(b, engine), jobs.Config{Handlers: mux, Fetch: fetch, Workers: workers,
					FetchCooldown: time.Millisecond})
				benchProcess(b, db, q)
			})
		}
	}
}

// benchProcess stores b.N events with their jobs, starts q and times it
// until none is left waiting.
func benchProcess(b *testing.B, db *store.DB, q *jobs.Queue) {
	ctx := context.Background()
	for i := 0; i < b.N; i += 100 {
		var batch []*payhook.Event
		for j := i; j < min(i+100, b.N); j++ {
			batch = append(batch, event(fmt.Sprint("evt_", j)))
		}
		if _, err := q.Ingest(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	if err := q.Start(ctx); err != nil {
		b.Fatal(err)
	}
	for {
		var waiting int
		db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_events WHERE status = 'received'`).Scan(&waiting)
		if waiting == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	q.Stop(ctx)
}
