package reconcile

import (
	"context"
	"time"
)

// FlushAt is Run's flush at time now.
func (c *SignatureCounter) FlushAt(ctx context.Context, now time.Time) error {
	return c.flush(ctx, now)
}
