package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/store"
)

// River returns the queue's River client, for River's own tools over
// the queue, such as its web UI (package jobs/jobsui). Jobs written or
// changed through it bypass the queue's rules (an event's job, its
// attempts): use it to read, or as riverui's operators do.
func (q *Queue) River() *river.Client[*sql.Tx] { return q.client }

// Attempt is one processing attempt of an event, as River's job rows
// keep it: each failed attempt with its error, and the attempt that
// succeeded (or is running).
type Attempt struct {
	// Job is River's id of the job that ran the attempt; 0 for the
	// success of a processed event of which River keeps no job that
	// succeeded, read from the event's row: one applied in another
	// event's batch (whose job the batch deleted), or one whose job
	// River's cleaner deleted. Its N is then the event's Attempts.
	Job int64 `json:"job"`
	// Replay is true for the attempts of a job enqueued by Replay.
	Replay bool `json:"replay,omitempty"`
	// N is the attempt's number within its job, from 1.
	N int `json:"attempt"`
	// At is when the attempt failed, finished, or started (running); for
	// one waiting, when it is due.
	At time.Time `json:"at"`
	// Outcome is "failed", "succeeded", "running" or "cancelled"; or
	// "waiting" for the next attempt of a job put off (Later: a read
	// waiting its turn under the provider's rate limit), due at At.
	Outcome string `json:"outcome"`
	// Error is the failed attempt's error.
	Error string `json:"error,omitempty"`
}

// snoozed reports whether River ever snoozed job (a Later): its
// metadata counts the snoozes and is never reset, so a job due again
// after a snooze and a failed attempt also reads waiting, as it is.
func snoozed(job *rivertype.JobRow) bool { return snoozes(job) > 0 }

// snoozes returns how many times River snoozed job (Laters).
func snoozes(job *rivertype.JobRow) int {
	var meta struct {
		Snoozes int `json:"snoozes"`
	}
	if json.Unmarshal(job.Metadata, &meta) != nil {
		return 0
	}
	return meta.Snoozes
}

// Attempts returns the processing attempts of the event with row id
// eventID that River still keeps, oldest first, and the success of a
// processed event whose job River does not keep (see Attempt.Job).
// River deletes finished jobs after a while (completed ones after a day
// by default), and a batch deletes the jobs of the events it applies
// besides its own: the event's Attempts and LastError are the lasting
// record.
func (q *Queue) Attempts(ctx context.Context, eventID int64) ([]Attempt, error) {
	where := "(args->>'event_id')::bigint = @event_id"
	if q.db.Engine == store.SQLite {
		where = "json_extract(args, '$.event_id') = @event_id"
	}
	params := river.NewJobListParams().Kinds(processArgs{}.Kind()).
		Where(where, river.NamedArgs{"event_id": eventID}).
		States(rivertype.JobStateAvailable, rivertype.JobStateCancelled, rivertype.JobStateCompleted,
			rivertype.JobStateDiscarded, rivertype.JobStatePending, rivertype.JobStateRetryable,
			rivertype.JobStateRunning, rivertype.JobStateScheduled).
		OrderBy(river.JobListOrderByID, river.SortOrderAsc).First(1000)
	res, err := q.client.JobList(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("attempts of event %d: %w", eventID, err)
	}
	out := []Attempt{}
	for _, job := range res.Jobs {
		var args processArgs
		replay := json.Unmarshal(job.EncodedArgs, &args) == nil && args.Replay != 0
		for _, e := range job.Errors {
			out = append(out, Attempt{Job: job.ID, Replay: replay, N: e.Attempt, At: e.At, Outcome: "failed", Error: e.Error})
		}
		failed := len(job.Errors) > 0 && job.Errors[len(job.Errors)-1].Attempt == job.Attempt
		switch {
		case job.State == rivertype.JobStateCompleted && job.FinalizedAt != nil:
			out = append(out, Attempt{Job: job.ID, Replay: replay, N: job.Attempt, At: *job.FinalizedAt, Outcome: "succeeded"})
		case job.State == rivertype.JobStateRunning && job.AttemptedAt != nil:
			out = append(out, Attempt{Job: job.ID, Replay: replay, N: job.Attempt, At: *job.AttemptedAt, Outcome: "running"})
		case job.State == rivertype.JobStateCancelled && job.FinalizedAt != nil && !failed:
			out = append(out, Attempt{Job: job.ID, Replay: replay, N: job.Attempt, At: *job.FinalizedAt, Outcome: "cancelled"})
		case (job.State == rivertype.JobStateScheduled || job.State == rivertype.JobStateAvailable) && snoozed(job):
			// Put off (River's snooze gives the attempt back): without
			// this the event only reads received, with no attempt.
			out = append(out, Attempt{Job: job.ID, Replay: replay, N: job.Attempt + 1, At: job.ScheduledAt, Outcome: "waiting"})
		}
	}
	if !slices.ContainsFunc(out, func(a Attempt) bool { return a.Outcome == "succeeded" }) {
		ev, err := q.db.Event(ctx, eventID)
		switch {
		case errors.Is(err, payhook.ErrNotFound):
		case err != nil:
			return nil, fmt.Errorf("attempts of event %d: %w", eventID, err)
		case ev.Status == payhook.StatusProcessed && !ev.ProcessedAt.IsZero():
			out = append(out, Attempt{N: ev.Attempts, At: ev.ProcessedAt, Outcome: "succeeded"})
		}
	}
	slices.SortStableFunc(out, func(a, b Attempt) int { return a.At.Compare(b.At) })
	return out, nil
}
