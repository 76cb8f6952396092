package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/payhook/payhook/billing"
	"github.com/payhook/payhook/store"
)

// AlertSilence: nothing was received from a source for longer than its
// configured silence; subject is the source. Raised once per silent
// spell (per last event received), cleared (acknowledged) when an event
// comes in again.
const AlertSilence = "source_silent"

// CheckSilence raises AlertSilence for source when its last event was
// received more than silence before now, and clears it when one came in
// since. A source that never received anything is not judged. It reports
// whether the source is silent.
func CheckSilence(ctx context.Context, db *store.DB, source string, silence time.Duration, now time.Time) (bool, error) {
	var last time.Time
	err := db.SQL.QueryRowContext(ctx, `SELECT MAX(received_at) FROM payhook_events WHERE source = $1`, source).Scan(store.ScanTime(&last))
	if err != nil {
		return false, fmt.Errorf("silence of %s: %w", source, err)
	}
	if last.IsZero() {
		return false, nil
	}
	tx, err := billing.Begin(ctx, db, now)
	if err != nil {
		return false, fmt.Errorf("silence of %s: %w", source, err)
	}
	defer tx.Rollback()
	silent := now.Sub(last) > silence
	if silent {
		_, err = billing.RaiseAlertOnce(ctx, tx, AlertSilence, source, source+"/"+last.UTC().Format(time.RFC3339Nano),
			fmt.Sprintf("source %s received nothing since %s (more than %s)", source, last.UTC().Format(time.RFC3339), silence))
	} else {
		_, err = tx.ExecContext(ctx, `UPDATE payhook_alerts SET acknowledged = TRUE
			WHERE kind = $1 AND subject = $2 AND acknowledged = FALSE`, AlertSilence, source)
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return false, fmt.Errorf("silence of %s: %w", source, err)
	}
	return silent, nil
}
