package jobs

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
)

// TestQuietKeepsJobKinds: River's warnings about one job kind do not
// hide those about another in the same period: a stuck sweep is told
// even while events' jobs are stuck too. The one left out is told when
// its period ends (on synctest's clock); debug lines never are.
func TestQuietKeepsJobKinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out dbtest.Buffer
		l := quiet(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})))
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
