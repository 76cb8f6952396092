package receiver_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/provider/standard"
)

// BenchmarkReceive measures acknowledged deliveries over loopback HTTP:
// verify, insert, enqueue, commit, answer. Each answer waits for the
// durable commit holding its event (SQLite synchronous=FULL, PostgreSQL
// synchronous_commit=on): its own, or with -grouped one shared by the
// deliveries that arrived together (groupcommit).
func BenchmarkReceive(b *testing.B) {
	for _, engine := range dbtest.Engines {
		for _, mode := range []string{"new", "duplicate", "new-grouped"} {
			b.Run(engine+"/"+mode, func(b *testing.B) {
				benchReceive(b, dbtest.URL(b, engine), mode == "duplicate", mode == "new-grouped")
			})
		}
	}
}

func benchReceive(b *testing.B, dbURL string, dup, grouped bool) {
	e := newEnvWith(b, dbURL, nil, grouped, newSecret)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var seq atomic.Int64
	b.SetParallelism(8) // 8×GOMAXPROCS concurrent deliveries
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := "evt_dup"
			if !dup {
				id = fmt.Sprint("evt_", seq.Add(1))
			}
			body := body(id, "test")
			h, _ := standard.Sign(newSecret, id, time.Now(), body)
			req, _ := http.NewRequest("POST", e.url+"/webhooks/billete-test", bytes.NewReader(body))
			req.Header = h
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
