package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/riverqueue/river"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/store"
)

// DefaultReplayRate is how many events a bulk replay re-enqueues per
// second when BulkOptions.Rate is 0: enough to clear an outage's failures
// in minutes, few enough that live deliveries still find free workers.
const DefaultReplayRate = 20

// MinReplayRate is the slowest bulk replay rate (BulkOptions.Rate), one
// event a day: slower is refused.
const MinReplayRate = 1.0 / (24 * 60 * 60)

// maxReplayBatch bounds the events one transaction of a bulk replay
// resets and enqueues.
const maxReplayBatch = 500

// BulkFilter selects the events of a bulk replay (payhook events replay
// --status S --source S --since D, and the console's bulk replay form).
type BulkFilter struct {
	// Source, Status and Since are required: a replay is bounded to one
	// source, one status (failed, or processed to re-run fixed handlers)
	// and the events received at Since or later.
	Source string
	Status payhook.Status
	Since  time.Time
	// Type, if set, selects one event type.
	Type string
	// Before, if set, selects only events with a smaller row id: the
	// console's confirmation replays nothing newer than its dry run showed.
	Before int64
}

// Check returns an error wrapping payhook.ErrInvalid when a required
// field is missing or the status is not failed or processed.
func (f BulkFilter) Check() error {
	switch {
	case f.Source == "":
		return fmt.Errorf("%w: bulk replay: a source is required", payhook.ErrInvalid)
	case f.Status != payhook.StatusFailed && f.Status != payhook.StatusProcessed:
		return fmt.Errorf("%w: bulk replay: status %q: want failed or processed (received events are waiting already, ignored ones were ignored for a reason)",
			payhook.ErrInvalid, f.Status)
	case f.Since.IsZero():
		return fmt.Errorf("%w: bulk replay: a since time is required", payhook.ErrInvalid)
	case f.Before < 0:
		return fmt.Errorf("%w: bulk replay: before %d: want an event's row id", payhook.ErrInvalid, f.Before)
	}
	if err := payhook.CheckTime("since", f.Since); err != nil {
		return fmt.Errorf("%w: bulk replay: %v", payhook.ErrInvalid, err)
	}
	return nil
}

func (f BulkFilter) store() store.Filter {
	return store.Filter{Source: f.Source, Status: f.Status, Type: f.Type, Since: f.Since, Before: f.Before}
}

// BulkPlan is what a bulk replay would replay (its dry run).
type BulkPlan struct {
	Filter BulkFilter
	// IDs are the row ids of the matching events, oldest first: the
	// order of the replay.
	IDs []int64
	// First are the newest of them (at most the number PlanReplay was
	// given), newest first, as the event list shows them.
	First []*payhook.Event
	// NoEvents says that the database holds no event at all of the
	// filter's source (a typo, another database or config?); Sources
	// then are the sources that have events, sorted, at most
	// maxSourcesShown. Set only when nothing matched.
	NoEvents bool
	Sources  []string
}

// maxSourcesShown bounds BulkPlan.Sources.
const maxSourcesShown = 20

// PlanReplay returns the events f selects, replaying nothing: their ids
// and the first show of them. A bad filter is an error wrapping
// payhook.ErrInvalid.
func (q *Queue) PlanReplay(ctx context.Context, f BulkFilter, show int) (*BulkPlan, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	ids, err := q.db.EventIDs(ctx, f.store())
	if err != nil {
		return nil, fmt.Errorf("plan bulk replay: %w", err)
	}
	p := &BulkPlan{Filter: f, IDs: ids}
	if len(ids) == 0 {
		if err := q.otherSources(ctx, p); err != nil {
			return nil, fmt.Errorf("plan bulk replay: %w", err)
		}
	}
	if len(ids) > 0 && show > 0 {
		sf := f.store()
		sf.Before, sf.Limit = ids[len(ids)-1]+1, show
		if p.First, err = q.db.ListEvents(ctx, sf); err != nil {
			return nil, fmt.Errorf("plan bulk replay: %w", err)
		}
	}
	return p, nil
}

// otherSources sets p's NoEvents and Sources when its source has no
// event at all.
func (q *Queue) otherSources(ctx context.Context, p *BulkPlan) error {
	var one int
	err := q.db.SQL.QueryRowContext(ctx, `SELECT 1 FROM payhook_events WHERE source = $1 LIMIT 1`, p.Filter.Source).Scan(&one)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("events of source %s: %w", p.Filter.Source, err)
	}
	p.NoEvents = true
	rows, err := q.db.SQL.QueryContext(ctx, `SELECT DISTINCT source FROM payhook_events ORDER BY source LIMIT $1`, maxSourcesShown)
	if err != nil {
		return fmt.Errorf("sources with events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return fmt.Errorf("sources with events: %w", err)
		}
		p.Sources = append(p.Sources, s)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sources with events: %w", err)
	}
	return nil
}

// BulkOptions tune ReplayBulk. Zero fields take the documented defaults.
type BulkOptions struct {
	// Rate is how many events are re-enqueued per second, at most.
	// Default DefaultReplayRate, at least MinReplayRate. Above 10/s the events go in batches,
	// ten a second.
	Rate float64
	// Progress, if set, is called after each batch with how many of the
	// plan's events have been gone through (replayed or skipped).
	Progress func(done, total int)
}

// BulkResult is what a bulk replay did.
type BulkResult struct {
	// Matched is how many events the plan held.
	Matched int
	// Replayed is how many were put back to received and enqueued, each
	// job marked as a replay (Attempt.Replay).
	Replayed int
	// Skipped are the ids of the events whose status had changed since
	// the plan was made (replayed by someone else, or processed by a
	// retry), left as they were.
	Skipped []int64
}

// ReplayBulk replays the plan's events, oldest first, at opts.Rate: each
// batch, in one transaction, puts back to received those still in the
// plan's status (a conditional UPDATE decides, so an event replayed twice
// at once is enqueued once) and enqueues their jobs marked as replays.
// An event whose status changed meanwhile is skipped and reported. When
// ctx ends or a batch fails, it returns what it did so far with the
// error; the batches done stay done. A bad rate is an error wrapping
// payhook.ErrInvalid.
func (q *Queue) ReplayBulk(ctx context.Context, p *BulkPlan, opts BulkOptions) (BulkResult, error) {
	res := BulkResult{Matched: len(p.IDs)}
	if err := p.Filter.Check(); err != nil {
		return res, err
	}
	batch, every, err := pace(opts.Rate)
	if err != nil {
		return res, err
	}
	var tick <-chan time.Time
	done := 0
	for chunk := range slices.Chunk(p.IDs, batch) {
		if tick == nil {
			// The first batch goes at once.
			t := time.NewTicker(every)
			defer t.Stop()
			tick = t.C
		} else {
			select {
			case <-ctx.Done():
				return res, fmt.Errorf("bulk replay stopped after %d of %d events: %w", done, len(p.IDs), ctx.Err())
			case <-tick:
			}
		}
		replayed, err := q.replayBatch(ctx, chunk, p.Filter.Status)
		if err != nil {
			return res, fmt.Errorf("bulk replay stopped after %d of %d events: %w", done, len(p.IDs), err)
		}
		res.Replayed += len(replayed)
		for _, id := range chunk {
			if !slices.Contains(replayed, id) {
				res.Skipped = append(res.Skipped, id)
			}
		}
		done += len(chunk)
		if opts.Progress != nil {
			opts.Progress(done, len(p.IDs))
		}
	}
	if res.Replayed > 0 {
		q.cfg.Logger.Info("bulk replay", "source", p.Filter.Source, "status", p.Filter.Status,
			"replayed", res.Replayed, "skipped", len(res.Skipped))
	}
	return res, nil
}

// pace turns a rate (events per second) into a batch size and the time
// between batches: one event at a time up to 10/s, then ten batches a
// second.
func pace(rate float64) (int, time.Duration, error) {
	if rate == 0 {
		rate = DefaultReplayRate
	}
	if math.IsNaN(rate) || math.IsInf(rate, 0) || rate < 0 {
		return 0, 0, fmt.Errorf("%w: bulk replay: rate %v: want a positive number of events per second", payhook.ErrInvalid, rate)
	}
	// Slower than one a day is a typo, and far slower overflows the
	// interval (a Duration), which would replay at full speed.
	if rate < MinReplayRate {
		return 0, 0, fmt.Errorf("%w: bulk replay: rate %v events a second is below one a day (%v/s)", payhook.ErrInvalid, rate, MinReplayRate)
	}
	batch := min(maxReplayBatch, max(1, int(math.Ceil(rate/10))))
	every := time.Duration(float64(batch) / rate * float64(time.Second))
	return batch, max(every, time.Microsecond), nil
}

// replayBatch resets the events of ids still in status and enqueues their
// replay jobs, in one transaction, and returns the ids it replayed.
func (q *Queue) replayBatch(ctx context.Context, ids []int64, status payhook.Status) ([]int64, error) {
	tx, err := q.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("replay %d events: %w", len(ids), err)
	}
	defer tx.Rollback()
	now := q.cfg.Now()
	done, err := q.db.ResetEventsIfTx(ctx, tx, ids, status, now)
	if err != nil || len(done) == 0 {
		return nil, err
	}
	params := make([]river.InsertManyParams, len(done))
	for i, id := range done {
		params[i] = river.InsertManyParams{Args: processArgs{EventID: id, Replay: now.UnixNano()}}
	}
	if _, err := q.client.InsertManyTx(ctx, tx, params); err != nil {
		return nil, fmt.Errorf("replay %d events: enqueue: %w", len(done), err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("replay %d events: commit: %w", len(done), err)
	}
	return done, nil
}
