package jobs

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivershared/uniquestates"

	"github.com/payhook/payhook/store"
)

// The ack path writes the jobs of new events into River's table itself,
// instead of through River's InsertManyTx, for two reasons:
//
//   - River's insert on PostgreSQL sends a NOTIFY in the caller's
//     transaction, and PostgreSQL serialises the commits of every
//     transaction that notified on one lock held through its WAL flush:
//     one instance's acks waited for the others' (and for processing's)
//     flushes, one at a time. payhook reaches PostgreSQL through
//     database/sql, which has no LISTEN: River's producers poll
//     (Config.PollInterval), so nothing listened to that NOTIFY anyway.
//   - On PostgreSQL the jobs go in the same statement as the events (a
//     WITH query over the rows inserted, see store.With): no round trip of
//     their own, and no ids sent back and forth.
//
// A row is what River's InsertManyTx writes for processArgs{EventID: id}
// with processArgs' InsertOpts: kind, args, queue default, priority 2,
// state available, MaxAttempts, metadata {} and tags [], created and
// scheduled now (the database's clock, or Now with StampWithNow), but
// without River's unique key and states. The key is a SHA-256, so each
// job's entry in River's unique index lands on a random page: on SQLite
// at the ack path's usual 10–20 events a commit, half of the pages each
// commit wrote were that index's. An event's job needs its key only when
// River is asked to insert the same job again, which is the sweep's
// business: keyLiveJobsTx gives the live jobs of the events the sweep
// looks at the key and states River computes (its dbunique package), just
// before River's own insert, which then finds them live as before.
// TestIngestedJobsAreRiversJobs compares the rows with River's.
// jobs/batch.go's lockJobsTx, endJobsTx and takeJobsTx also read and
// write this table directly.

// processUniqueKey is River's unique key of processArgs{EventID: id}: the
// SHA-256 of "&kind=" + kind + "&args=" + the args' unique fields as JSON,
// sorted, those left empty (omitempty) left out.
func processUniqueKey(id int64) []byte {
	k := sha256.Sum256([]byte(processUniquePrefix + strconv.FormatInt(id, 10) + "}"))
	return k[:]
}

// processUniquePrefix is the start of processUniqueKey's hashed text;
// the event id and "}" follow.
var processUniquePrefix = `&kind=` + processArgs{}.Kind() + `&args={"event_id":`

// liveStatesMask is River's bitmask of liveStates (unique_states).
var liveStatesMask = int(uniquestates.UniqueStatesToBitmask(liveStates))

// liveStatesList is liveStates as an SQL list: 'available', 'pending', ...
var liveStatesList = func() string {
	quoted := make([]string, len(liveStates))
	for i, st := range liveStates {
		quoted[i] = "'" + string(st) + "'"
	}
	return strings.Join(quoted, ", ")
}()

// processJobsWith returns the statement that inserts, with the insert of
// events on PostgreSQL, the job of each event inserted as received.
func (q *Queue) processJobsWith() store.With {
	var now any
	if q.cfg.StampWithNow {
		now = q.cfg.Now().UTC()
	}
	return store.With{
		SQL: func(f int) string {
			at := fmt.Sprintf("coalesce($%d::timestamptz, now())", f)
			return `INSERT INTO river_job
				(args, created_at, kind, max_attempts, metadata, priority, queue, scheduled_at, state, tags)
			SELECT jsonb_build_object('event_id', id), ` + at + `, '` + processArgs{}.Kind() + `', $` + strconv.Itoa(f+1) + `::smallint,
				'{}'::jsonb, ` + strconv.Itoa(workPriority) + `, '` + river.QueueDefault + `', ` + at + `, 'available', '{}'
			FROM inserted WHERE status = 'received'
			ORDER BY id`
		},
		Args: []any{now, q.cfg.MaxAttempts},
	}
}

// insertProcessJobsTx inserts in tx the jobs of the events with row ids
// ids, in one statement per maxJobRows, as processJobsWith does: on
// SQLite, which has no data-modifying WITH, and for events stored one at
// a time.
func (q *Queue) insertProcessJobsTx(ctx context.Context, tx *sql.Tx, ids []int64) error {
	for chunk := range slices.Chunk(ids, maxJobRows) {
		if err := q.insertProcessJobsChunkTx(ctx, tx, chunk); err != nil {
			return fmt.Errorf("enqueue %d events: %w", len(ids), err)
		}
	}
	return nil
}

// maxJobRows bounds the rows of one insert of jobs: SQLite allows 32,766
// arguments, and each row takes four.
const maxJobRows = 1000

func (q *Queue) insertProcessJobsChunkTx(ctx context.Context, tx *sql.Tx, ids []int64) error {
	var now any
	args := make([]any, 0, 4*len(ids))
	var b strings.Builder
	if q.db.Engine == store.SQLite {
		// OR FAIL, as the events' insert before it (see
		// store.DB.InsertEventsTx): no statement journal; Ingest rolls
		// back on an error.
		b.WriteString(`INSERT OR FAIL`)
	} else {
		b.WriteString(`INSERT`)
	}
	b.WriteString(` INTO river_job
		(args, created_at, kind, max_attempts, metadata, priority, queue, scheduled_at, state, tags)
		VALUES `)
	if q.db.Engine == store.SQLite {
		// The time is this machine's, SQLite's own clock, formatted once
		// for the statement rather than by datetime('now', 'subsec') twice
		// a row (with OR FAIL, 4.4% less CPU an event in BenchmarkIngest,
		// docs/benchmarks.md). Cut to the millisecond, never rounded up,
		// it is never later than the time of a take that follows
		// (lockJobsTx).
		t := time.Now().Truncate(time.Millisecond)
		if q.cfg.StampWithNow {
			t = q.cfg.Now().Round(time.Millisecond)
		}
		now = t.UTC().Format(riverSQLiteTime)
		// Anonymous parameters, each given its argument (see
		// store.DB.Row).
		row := fmt.Sprintf(`(jsonb(?), ?, '%s', ?, jsonb('{}'), %d, '%s', ?, 'available', jsonb('[]'))`,
			processArgs{}.Kind(), workPriority, river.QueueDefault)
		for i, id := range ids {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(row)
			args = append(args, `{"event_id":`+strconv.FormatInt(id, 10)+`}`, now, q.cfg.MaxAttempts, now)
		}
	} else {
		if q.cfg.StampWithNow {
			now = q.cfg.Now().UTC()
		}
		args = append(args, now, q.cfg.MaxAttempts)
		for i, id := range ids {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `($%d::jsonb, coalesce($1::timestamptz, now()), '%s', $2::smallint, '{}'::jsonb, %d, '%s',
				coalesce($1::timestamptz, now()), 'available', '{}')`,
				3+i, processArgs{}.Kind(), workPriority, river.QueueDefault)
			args = append(args, `{"event_id":`+strconv.FormatInt(id, 10)+`}`)
		}
	}
	if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
		return err
	}
	return nil
}

// jobEventID is the event id of a processing job's args, as the index
// payhook_river_job_unkeyed (Migrate) has it.
func jobEventID(engine store.Engine) string {
	if engine == store.SQLite {
		return `CAST(args->>'event_id' AS INTEGER)`
	}
	return `((args->>'event_id')::bigint)`
}

// keyLiveJobsTx gives, in tx, the live job without a unique key of each
// of the events with row ids ids (the one Ingest wrote, at most one an
// event) River's unique key and states, so that River's insert of the
// same job finds it live. A job whose key another live job holds already
// is left as it is: River finds that one. On PostgreSQL it is one
// statement for all the ids (a round trip each took five times River's
// insert of them); on SQLite, in the process, one prepared statement run
// for each.
func (q *Queue) keyLiveJobsTx(ctx context.Context, tx *sql.Tx, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	unkeyed := `kind = '` + processArgs{}.Kind() + `' AND unique_key IS NULL AND state IN (` + liveStatesList + `)`
	event := jobEventID(q.db.Engine)
	if q.db.Engine == store.Postgres {
		// The key as processUniqueKey computes it. A key another live
		// job holds is left by the subquery, one probe of River's unique
		// index (whose predicate it repeats) a job: as NOT EXISTS, the
		// planner hashed every live key instead (212 ms for 1,000 ids
		// beside 250,000 live jobs, against 51).
		_, err := tx.ExecContext(ctx, `UPDATE river_job SET unique_key = k.key, unique_states = $1::integer::bit(8)
			FROM (SELECT DISTINCT ON (e) id, sha256(convert_to('`+processUniquePrefix+`' || e || '}', 'UTF8')) AS key
				FROM (SELECT id, `+event+` AS e FROM river_job WHERE `+unkeyed+` AND `+event+` = ANY($2::bigint[])) AS u
				ORDER BY e, id) AS k
			WHERE river_job.id = k.id
				AND (SELECT 1 FROM river_job o WHERE o.unique_key = k.key AND o.unique_states IS NOT NULL
					AND river_job_state_in_bitmask(o.unique_states, o.state) LIMIT 1) IS NULL`, liveStatesMask, ids)
		if err != nil {
			return fmt.Errorf("key the live jobs of %d events: %w", len(ids), err)
		}
		return nil
	}
	// A key another live job holds: OR IGNORE leaves that job.
	stmt, err := tx.PrepareContext(ctx, `UPDATE OR IGNORE river_job SET unique_key = $1, unique_states = $2
		WHERE id = (SELECT id FROM river_job WHERE `+unkeyed+` AND `+event+` = $3 ORDER BY id LIMIT 1)`)
	if err != nil {
		return fmt.Errorf("key the live jobs of %d events: %w", len(ids), err)
	}
	defer stmt.Close()
	for _, id := range ids {
		if _, err := stmt.ExecContext(ctx, processUniqueKey(id), liveStatesMask, id); err != nil {
			return fmt.Errorf("key the live job of event %d: %w", id, err)
		}
	}
	return nil
}
