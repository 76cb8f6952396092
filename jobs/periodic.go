package jobs

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/payhook/payhook/store"
)

// Periodic is work run every Every (a source's scheduled backfill and
// reconcile). When several instances share a PostgreSQL database it runs
// on one of them: River's elected leader inserts the periodic jobs, and
// each period's job is unique (by name and period), so a change of leader
// in the middle of a period does not run it twice; a claim in the
// database (store.ClaimPeriod) makes sure. A period whose start finds the
// run of an earlier one still under way is skipped (store.DB.TryHold),
// so that two runs of one Periodic never overlap.
type Periodic struct {
	// Name identifies the work, e.g. "reconcile:shop": letters, digits,
	// '_', '-', '.' and ':', unique within a Config.
	Name string
	// Every is the interval between two runs (at least one second).
	Every time.Duration
	// Run does the work of the period that starts at period (the job's
	// insertion time truncated to Every). Its error is logged and the
	// run is not retried: the next period runs again.
	Run func(ctx context.Context, period time.Time) error
}

// periodicName is what a Periodic's name must look like (River's
// periodic job ids take no spaces).
var periodicName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:-]*$`)

// periodicArgs is the job of one period of a Periodic.
type periodicArgs struct {
	Name string `json:"name" river:"unique"`
}

func (periodicArgs) Kind() string { return "payhook_periodic" }

// periodicJobs checks ps and returns their River periodic jobs and the
// worker that runs them.
func periodicJobs(db *store.DB, ps []Periodic, now func() time.Time, logf func(msg string, args ...any)) ([]*river.PeriodicJob, river.Worker[periodicArgs], error) {
	byName := map[string]Periodic{}
	var out []*river.PeriodicJob
	for _, p := range ps {
		if !periodicName.MatchString(p.Name) || p.Run == nil || p.Every < time.Second {
			return nil, nil, fmt.Errorf("periodic job %q: a name (letters, digits, _-.:), a run and an interval of at least 1s are required (got %v)", p.Name, p.Every)
		}
		if _, dup := byName[p.Name]; dup {
			return nil, nil, fmt.Errorf("periodic job %q given twice", p.Name)
		}
		byName[p.Name] = p
		out = append(out, river.NewPeriodicJob(
			river.PeriodicInterval(p.Every),
			func() (river.JobArgs, *river.InsertOpts) {
				return periodicArgs{Name: p.Name}, &river.InsertOpts{
					// One run per period, whichever instance inserts it;
					// not retried (the next period runs again).
					MaxAttempts: 1,
					UniqueOpts:  river.UniqueOpts{ByArgs: true, ByPeriod: p.Every},
				}
			},
			&river.PeriodicJobOpts{ID: "payhook_periodic:" + p.Name},
		))
	}
	worker := periodicWorker(func(ctx context.Context, job *river.Job[periodicArgs]) error {
		p, ok := byName[job.Args.Name]
		if !ok {
			// Another instance's config: not ours to run.
			return river.JobCancel(fmt.Errorf("no periodic job %q here", job.Args.Name))
		}
		period := job.CreatedAt.UTC().Truncate(p.Every)
		// A run that outlasts its period (an API down, retried with
		// backoff) is not joined by the next one, on any instance: that
		// period is skipped, the one after runs again.
		release, held, err := db.TryHold(ctx, "periodic:"+p.Name)
		if err != nil {
			return err
		}
		if !held {
			logf("periodic job skipped: the run of an earlier period is still under way", "job", p.Name, "period", period)
			return nil
		}
		defer release()
		// River inserts one job per period; the claim makes sure, should
		// it insert two (a change of leader, a cancelled first job).
		claimed, err := db.ClaimPeriod(ctx, p.Name, period, now())
		if err != nil {
			return err
		}
		if !claimed {
			return nil
		}
		if err := p.Run(ctx, period); err != nil {
			logf("periodic job failed", "job", p.Name, "period", period, "err", err)
			return river.JobCancel(err)
		}
		return nil
	})
	return out, worker, nil
}

// periodicWorker runs a period's job. Its runs are not bounded by the
// queue's JobTimeout, which bounds one processing attempt of an event: a
// scheduled backfill of a day's events and its wait for the workers
// (which waits as long as they make progress) take longer, and cut
// there, a run needing more failed at the same point every period. A run
// ends when its work does (its calls have their own timeouts), when the
// queue stops and cancels it, or at periodicTimeout; until then TryHold
// keeps the next periods from joining it.
type periodicWorker func(ctx context.Context, job *river.Job[periodicArgs]) error

func (w periodicWorker) Work(ctx context.Context, job *river.Job[periodicArgs]) error {
	return w(ctx, job)
}

func (periodicWorker) Middleware(*rivertype.JobRow) []rivertype.WorkerMiddleware { return nil }

func (periodicWorker) NextRetry(*river.Job[periodicArgs]) time.Time { return time.Time{} }

// Timeout is periodicTimeout (see periodicWorker).
func (periodicWorker) Timeout(*river.Job[periodicArgs]) time.Duration { return periodicTimeout }

// periodicTimeout bounds a periodic run: one still under way after it is
// stuck, and is cancelled, so that the periods after it run again. River's
// rescuer takes the job of a process that died for stuck after as long
// (with no timeout it would leave it running for ever).
const periodicTimeout = 6 * time.Hour
