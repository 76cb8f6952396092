package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"
)

// stepClient names the jobs Step claims (River's attempted_by).
const stepClient = "payhook-step"

// Step runs the next due job, as River orders them (by priority, then the
// oldest; of River's default queue, then of DeliveryQueue), to its end in
// the calling goroutine, with the code River's workers run (Process for
// an event, Config.Deliver for a delivery, Sweep, Config.Periodic), and
// reports whether there was one.
// It is for a simulation that must choose every interleaving itself
// (internal/dst): a stepped Queue is never started, and each call is one
// step.
//
// Like River, it first makes the retries and scheduled jobs that are due
// available, claims the next one with River's own conditional query
// (state available, scheduled before now), and writes the end of the
// attempt with River's conditional update (only if still running):
// completed; retryable with the queue's backoff; discarded after the last
// attempt; cancelled for an error wrapping payhook.ErrMalformed; put off
// (River's snooze: scheduled, the attempt not counted) for a Fetch's
// Later. The attempt's own error is in err only when the job's end could
// not be written; the job's failure is the job's (on the event's row and
// in River's errors), not the step's. A process that dies between the claim
// and that write leaves the job running, as River would: the sweep stands
// in for it after RescueAfter.
func (q *Queue) Step(ctx context.Context) (bool, error) {
	exec := driver(q.db).GetExecutor()
	now := q.cfg.Now()
	if _, err := exec.JobSchedule(ctx, &riverdriver.JobScheduleParams{Max: 100, Now: &now}); err != nil {
		return false, fmt.Errorf("step: schedule due jobs: %w", err)
	}
	// The queues one after the other: a stepped Queue has no workers of
	// its own per queue, and the events' jobs come first.
	var got *riverdriver.JobGetAvailableResult
	for _, queue := range []string{river.QueueDefault, DeliveryQueue} {
		var err error
		got, err = exec.JobGetAvailable(ctx, &riverdriver.JobGetAvailableParams{
			ClientID: stepClient, MaxAttemptedBy: 100, MaxToLock: 1, Now: &now, Queue: queue,
		})
		if err != nil {
			return false, fmt.Errorf("step: claim the next job: %w", err)
		}
		if len(got.Jobs) > 0 {
			break
		}
	}
	if len(got.Jobs) == 0 {
		return false, nil
	}
	row := got.Jobs[0]
	werr := got.DecodeErrors[row.ID]
	if werr == nil {
		werr = q.stepWork(ctx, row)
	}
	end := q.cfg.Now()
	var set *riverdriver.JobSetStateIfRunningParams
	var cancel *rivertype.JobCancelError
	var snooze *rivertype.JobSnoozeError
	switch {
	case werr == nil:
		set = riverdriver.JobSetStateCompleted(row.ID, end, nil)
	case errors.As(werr, &snooze):
		// A Fetch's Later: put off as River puts it off, the attempt
		// given back and the snooze counted in the metadata.
		counted, _ := json.Marshal(map[string]int{"snoozes": snoozes(row) + 1})
		set = riverdriver.JobSetStateSnoozed(row.ID, end.Add(snooze.Duration), row.Attempt-1, counted)
	case errors.As(werr, &cancel):
		set = riverdriver.JobSetStateCancelled(row.ID, end, attemptError(row, end, werr), nil)
	case row.Attempt >= row.MaxAttempts:
		set = riverdriver.JobSetStateDiscarded(row.ID, end, attemptError(row, end, werr), nil)
	default:
		retry := q.retry
		if retry == nil {
			retry = &river.DefaultClientRetryPolicy{}
		}
		set = riverdriver.JobSetStateErrorRetryable(row.ID, retry.NextRetry(row), attemptError(row, end, werr), nil)
	}
	if _, err := exec.JobSetStateIfRunningMany(context.WithoutCancel(ctx), &riverdriver.JobSetStateIfRunningManyParams{
		ID: []int64{set.ID}, Attempt: []*int{set.Attempt}, ErrData: [][]byte{set.ErrData},
		FinalizedAt: []*time.Time{set.FinalizedAt}, MetadataDoMerge: []bool{set.MetadataDoMerge}, MetadataUpdates: [][]byte{set.MetadataUpdates},
		ScheduledAt: []*time.Time{set.ScheduledAt}, State: []rivertype.JobState{set.State}, Now: &end,
	}); err != nil {
		return true, fmt.Errorf("step: end job %d (%s): %w", row.ID, row.Kind, err)
	}
	return true, nil
}

// stepWork runs one attempt of row with the worker River would run.
func (q *Queue) stepWork(ctx context.Context, row *rivertype.JobRow) error {
	ctx, cancel := context.WithTimeout(ctx, q.cfg.JobTimeout)
	defer cancel()
	switch row.Kind {
	case processArgs{}.Kind():
		return stepRun(ctx, row, q.work)
	case deliverArgs{}.Kind():
		return stepRun(ctx, row, q.deliver)
	case sweepArgs{}.Kind():
		return stepRun(ctx, row, q.sweep)
	case periodicArgs{}.Kind():
		return stepRun(ctx, row, q.periodic.Work)
	}
	return river.JobCancel(fmt.Errorf("step: no worker for job kind %q", row.Kind))
}

func stepRun[T river.JobArgs](ctx context.Context, row *rivertype.JobRow, work func(context.Context, *river.Job[T]) error) error {
	job := &river.Job[T]{JobRow: row}
	if err := json.Unmarshal(row.EncodedArgs, &job.Args); err != nil {
		return river.JobCancel(fmt.Errorf("step: job %d: decode args: %w", row.ID, err))
	}
	return work(ctx, job)
}

// attemptError is River's record of a failed attempt.
func attemptError(row *rivertype.JobRow, at time.Time, err error) []byte {
	b, _ := json.Marshal(rivertype.AttemptError{At: at, Attempt: row.Attempt, Error: storable(err).Error()})
	return b
}
