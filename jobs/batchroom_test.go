package jobs

import "testing"

// TestBatchRoom: a batch takes Batch-1 jobs besides its own, fewer when
// guarded, when the last batch's time per event says fewer fit in
// BatchTime, or when its payload bytes per event say fewer fit in
// BatchBytes; none when even one would not.
func TestBatchRoom(t *testing.T) {
	for _, tc := range []struct {
		name    string
		guarded bool
		cost    int64 // eventCost, ns
		size    int64 // payloadSize, bytes
		want    int
	}{
		{"no history", false, 0, 0, 511},
		{"guarded", true, 0, 0, guardedBatch - 1},
		{"100 µs an event in 100 ms", false, 100_000, 0, 511},
		{"1 ms an event in 100 ms", false, 1_000_000, 0, 100},
		{"a few KiB an event", false, 0, 4 << 10, 511},
		{"1 MiB an event in 8 MiB", false, 0, 1 << 20, 7},
		{"1 MiB an event, 1 ms each", false, 1_000_000, 1 << 20, 7},
		{"8 MiB an event", false, 0, 8 << 20, 0},
		{"past BatchBytes", false, 0, 9 << 20, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &Queue{cfg: Config{Batch: 512, BatchBytes: DefaultBatchBytes, BatchTime: 100e6}}
			q.eventCost.Store(tc.cost)
			q.payloadSize.Store(tc.size)
			if got := q.batchRoom(tc.guarded, false); got != tc.want {
				t.Errorf("batchRoom = %d; want %d", got, tc.want)
			}
		})
	}
}
