package jobs

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestQuietKeepsJobKinds: River's warnings about one job kind do not
// hide those about another in the same period: a stuck sweep is told
// even while events' jobs are stuck too.
func TestQuietKeepsJobKinds(t *testing.T) {
	var out bytes.Buffer
	l := quiet(slog.New(slog.NewTextHandler(&out, nil)))
	l.Warn("jobexecutor.JobExecutor: Job appears to be stuck", "job_id", 1, "job_kind", "payhook_process")
	l.Warn("jobexecutor.JobExecutor: Job appears to be stuck", "job_id", 2, "job_kind", "payhook_process")
	l.Warn("jobexecutor.JobExecutor: Job appears to be stuck", "job_id", 3, "job_kind", "payhook_sweep")
	if n := strings.Count(out.String(), "\n"); n != 2 || !strings.Contains(out.String(), "job_kind=payhook_sweep") {
		t.Errorf("River's log:\n%s\nwant the first stuck job of each kind, 2 lines", out.String())
	}
}
