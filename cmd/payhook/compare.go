package main

import (
	"context"

	"github.com/payhook/payhook/cmd/payhook/checkdb"
	"github.com/payhook/payhook/sim"
	"github.com/payhook/payhook/sim/check"
	"github.com/payhook/payhook/store"
)

// compareBilling returns, one line each, the differences between
// payhook's billing state for source and the provider's final state
// (check.Billing); none when payhook agrees.
func compareBilling(ctx context.Context, db *store.DB, source string, exp sim.Expected) ([]string, error) {
	diffs, err := check.Billing(ctx, checkdb.Receiver{DB: db, Source: source}, exp)
	if err != nil {
		return nil, err
	}
	lines := make([]string, len(diffs))
	for i, d := range diffs {
		lines[i] = d.String()
	}
	return lines, nil
}
