package stripecapture

import "testing"

func TestRemainderAndRefunded(t *testing.T) {
	for _, c := range []struct {
		amount, captured, refunded int64
		isCaptured                 bool
		remainder, left            int64
	}{
		{1099, 800, 299, true, 299, 0},   // the release alone
		{1099, 800, 399, true, 299, 100}, // and a refund of 100
		{1099, 800, 0, true, 299, 0},     // the release not counted (yet): never below 0
		{1099, 1099, 100, true, 0, 100},  // captured in full
		{1099, 0, 1099, false, 0, 1099},  // never captured: no partial capture
		{1099, 800, 1099, false, 0, 1099},
	} {
		if r := Remainder(c.amount, c.captured, c.isCaptured); r != c.remainder {
			t.Errorf("Remainder(%d, %d, %v) = %d; want %d", c.amount, c.captured, c.isCaptured, r, c.remainder)
		}
		if r := Refunded(c.amount, c.captured, c.refunded, c.isCaptured); r != c.left {
			t.Errorf("Refunded(%d, %d, %d, %v) = %d; want %d", c.amount, c.captured, c.refunded, c.isCaptured, r, c.left)
		}
	}
}

func TestRelease(t *testing.T) {
	release := Refund{Amount: 299, Status: "succeeded", Created: 10}
	later := Refund{Amount: 299, Status: "succeeded", Created: 20}
	asked := Refund{Amount: 299, Reason: "requested_by_customer", Status: "succeeded", Created: 5}
	failed := Refund{Amount: 299, Status: "failed", Created: 1}
	other := Refund{Amount: 100, Status: "succeeded", Created: 1}
	for _, c := range []struct {
		name      string
		remainder int64
		refunds   []Refund
		want      int
	}{
		{"no partial capture", 0, []Refund{release}, -1},
		{"the release alone", 299, []Refund{release}, 0},
		{"newest first", 299, []Refund{later, other, release}, 2},
		{"oldest first", 299, []Refund{release, later}, 0},
		{"a reason is no release", 299, []Refund{asked}, -1},
		{"a failed one is no release", 299, []Refund{failed, release}, 1},
		{"released by its reason already", 299, []Refund{later, {Amount: 299, Reason: ReasonReleased, Status: "succeeded"}}, -1},
		{"none of the amount", 299, []Refund{other}, -1},
	} {
		if got := Release(c.remainder, c.refunds); got != c.want {
			t.Errorf("%s: Release = %d; want %d", c.name, got, c.want)
		}
	}
}
