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
// scheduled now (the database's clock, or Now with StampWithNow), and the
// unique key and states River computes (its dbunique package), so that
// River's own inserts of the same job (the sweep's) still find it live.
// TestIngestedJobsAreRiversJobs compares the rows with River's.
// jobs/batch.go's takeJobsTx also reads and writes this table directly.

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
				(args, created_at, kind, max_attempts, metadata, priority, queue, scheduled_at, state, tags, unique_key, unique_states)
			SELECT jsonb_build_object('event_id', id), ` + at + `, '` + processArgs{}.Kind() + `', $` + strconv.Itoa(f+1) + `::smallint,
				'{}'::jsonb, ` + strconv.Itoa(workPriority) + `, '` + river.QueueDefault + `', ` + at + `, 'available', '{}',
				sha256(convert_to('` + processUniquePrefix + `' || id || '}', 'UTF8')), $` + strconv.Itoa(f+2) + `::integer::bit(8)
			FROM inserted WHERE status = 'received'
			ORDER BY id
			ON CONFLICT (unique_key)
				WHERE unique_key IS NOT NULL AND unique_states IS NOT NULL AND river_job_state_in_bitmask(unique_states, state)
				DO NOTHING`
		},
		Args: []any{now, q.cfg.MaxAttempts, liveStatesMask},
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
// arguments, and each row takes six.
const maxJobRows = 1000

func (q *Queue) insertProcessJobsChunkTx(ctx context.Context, tx *sql.Tx, ids []int64) error {
	var now any
	args := make([]any, 0, 6*len(ids))
	var b strings.Builder
	if q.db.Engine == store.SQLite {
		if q.cfg.StampWithNow {
			now = q.cfg.Now().UTC().Round(time.Millisecond).Format(riverSQLiteTime)
		}
		// Anonymous parameters, each given its argument (see
		// store.DB.Row).
		b.WriteString(`INSERT INTO river_job
			(args, created_at, kind, max_attempts, metadata, priority, queue, scheduled_at, state, tags, unique_key, unique_states)
			VALUES `)
		row := fmt.Sprintf(`(jsonb(?), coalesce(CAST(? AS TEXT), datetime('now', 'subsec')), '%s', ?, jsonb('{}'), %d, '%s',
				coalesce(CAST(? AS TEXT), datetime('now', 'subsec')), 'available', jsonb('[]'), ?, ?)`,
			processArgs{}.Kind(), workPriority, river.QueueDefault)
		for i, id := range ids {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(row)
			args = append(args, `{"event_id":`+strconv.FormatInt(id, 10)+`}`, now, q.cfg.MaxAttempts, now,
				processUniqueKey(id), liveStatesMask)
		}
		b.WriteString(`
			ON CONFLICT (unique_key)
				WHERE unique_key IS NOT NULL AND unique_states IS NOT NULL
					AND CASE state
						WHEN 'available' THEN unique_states & (1 << 0)
						WHEN 'cancelled' THEN unique_states & (1 << 1)
						WHEN 'completed' THEN unique_states & (1 << 2)
						WHEN 'discarded' THEN unique_states & (1 << 3)
						WHEN 'pending'   THEN unique_states & (1 << 4)
						WHEN 'retryable' THEN unique_states & (1 << 5)
						WHEN 'running'   THEN unique_states & (1 << 6)
						WHEN 'scheduled' THEN unique_states & (1 << 7)
						ELSE 0
					END >= 1
				DO NOTHING`)
	} else {
		if q.cfg.StampWithNow {
			now = q.cfg.Now().UTC()
		}
		args = append(args, now, q.cfg.MaxAttempts, liveStatesMask)
		b.WriteString(`INSERT INTO river_job
			(args, created_at, kind, max_attempts, metadata, priority, queue, scheduled_at, state, tags, unique_key, unique_states)
			VALUES `)
		for i, id := range ids {
			if i > 0 {
				b.WriteString(", ")
			}
			n := 4 + 2*i
			fmt.Fprintf(&b, `($%d::jsonb, coalesce($1::timestamptz, now()), '%s', $2::smallint, '{}'::jsonb, %d, '%s',
				coalesce($1::timestamptz, now()), 'available', '{}', $%d::bytea, $3::integer::bit(8))`,
				n, processArgs{}.Kind(), workPriority, river.QueueDefault, n+1)
			args = append(args, `{"event_id":`+strconv.FormatInt(id, 10)+`}`, processUniqueKey(id))
		}
		b.WriteString(`
			ON CONFLICT (unique_key)
				WHERE unique_key IS NOT NULL AND unique_states IS NOT NULL AND river_job_state_in_bitmask(unique_states, state)
				DO NOTHING`)
	}
	if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
		return err
	}
	return nil
}
