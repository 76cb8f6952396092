package jobs

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
)

// TestQuietKeepsJobKinds: River's warnings about one job kind do not
// hide those about another in the same period: a stuck sweep is told
// even while events' jobs are stuck too. The one left out is told when
// its period ends (on synctest's clock); debug lines never are.
func TestQuietKeepsJobKinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out dbtest.Buffer
		l := slog.New(quiet(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})))
		l.Warn("jobexecutor.JobExecutor: Job appears to be stuck", "job_id", 1, "job_kind", "payhook_process")
		l.Warn("jobexecutor.JobExecutor: Job appears to be stuck", "job_id", 2, "job_kind", "payhook_process")
		l.Warn("jobexecutor.JobExecutor: Job appears to be stuck", "job_id", 3, "job_kind", "payhook_sweep")
		l.Debug("producer: fetched", "queue", "default")
		if got := out.String(); strings.Count(got, "\n") != 2 || !strings.Contains(got, "job_kind=payhook_sweep") {
			t.Errorf("River's log:\n%s\nwant the first stuck job of each kind, 2 lines", got)
		}
		time.Sleep(riverFloodPeriod)
		synctest.Wait()
		if got := out.String(); strings.Count(got, "\n") != 3 || !strings.Contains(got, "job_id=2 job_kind=payhook_process") {
			t.Errorf("River's log a period later:\n%s\nwant the stuck job left out told too, 3 lines", got)
		}
	})
}

// TestStopTellsWhatWasLeftOut: Stop tells River's log lines held back at
// once, with their count, and calls Config.OnStop, once River has
// stopped: a process that exits after Stop would not live a period to
// see them.
func TestStopTellsWhatWasLeftOut(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := migrated(t, dbURL)
		var out dbtest.Buffer
		var stopped atomic.Int32
		q, err := New(db, Config{Handlers: &payhook.Mux{}, Logger: slog.New(slog.NewTextHandler(&out, nil)),
			OnStop: func() { stopped.Add(1) }})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Start(ctx); err != nil {
			t.Fatal(err)
		}
		l := slog.New(q.riverLog)
		for i := range 3 {
			l.Warn("producer: fetch failed", "attempt", i, "queue", "default")
		}
		if err := q.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if got := out.String(); strings.Count(got, "fetch failed") != 2 || !strings.Contains(got, "attempt=2 queue=default left_out=1") {
			t.Errorf("River's log after Stop:\n%s\nwant the first line and the last left out, with left_out=1", got)
		}
		if n := stopped.Load(); n != 1 {
			t.Errorf("OnStop called %d times; want 1", n)
		}
	})
}
