package receiver_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/provider/standard"
	"github.com/payhook/payhook/store"
)

// send delivers a signed billete event from any goroutine and returns the
// status, or 0 and the error when there was no answer.
func (e *env) send(id string) (int, error) {
	b := body(id, "test")
	h, err := standard.Sign(newSecret, id, time.Now(), b)
	if err != nil {
		return 0, err
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/webhooks/billete-test", bytes.NewReader(b))
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestLockedEventDoesNotBlockOthers: while another transaction holds the
// key of one event (an uncommitted insert of it, as a second payhook
// instance mid-commit holds; or an update of its stored row, as its
// processing holds) and that event is delivered again and again,
// deliveries of unrelated events through the real receiver and group
// committer are all answered 200 and stored before the lock is released;
// afterwards the blocked event is answered 200 and stored once. Before,
// the group commit holding the blocked event waited on the lock, and the
// unrelated deliveries behind it timed out with 503.
//
// PostgreSQL only: SQLite has one writer, so a transaction holding its
// lock holds up every delivery, related or not, by design.
func TestLockedEventDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		stored bool // the event is stored before the lock is taken
	}{
		{"uncommitted insert", false},
		{"event being processed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testLockedEvent(t, tc.stored)
		})
	}
}

func testLockedEvent(t *testing.T, stored bool) {
	ctx := context.Background()
	dbURL := dbtest.URL(t, "postgres")
	e := newEnvWith(t, dbURL, nil, true, newSecret)
	if stored {
		if code, err := e.send("evt_locked"); err != nil || code != 200 {
			t.Fatalf("first delivery of evt_locked = %d, %v", code, err)
		}
	}

	other, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.SQL.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if stored {
		// As ClaimEventTx does for the length of the event's processing.
		if _, err := tx.Exec(`UPDATE payhook_events SET attempts = attempts + 1 WHERE event_id = 'evt_locked'`); err != nil {
			t.Fatal(err)
		}
	} else {
		held := &payhook.Event{Source: "billete-test", EventID: "evt_locked", Type: "checkout.completed",
			ReceivedAt: time.Now(), Payload: body("evt_locked", "test")}
		if _, err := other.InsertEventsTx(ctx, tx, []*payhook.Event{held}); err != nil {
			t.Fatal(err)
		}
	}

	// The provider retries the blocked event all along.
	stop := make(chan struct{})
	var retries sync.WaitGroup
	stopRetries := sync.OnceFunc(func() { close(stop); retries.Wait() })
	defer stopRetries()
	var mu sync.Mutex
	blocked := map[int]int{}
	for range 2 {
		retries.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, err := e.send("evt_locked")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				blocked[code]++
				mu.Unlock()
			}
		})
	}
	// Until the blocked delivery waits on the lock.
	for waiting := 0; waiting == 0; {
		if err := e.db.SQL.QueryRow(`SELECT COUNT(*) FROM pg_locks WHERE NOT granted`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}

	const n = 60
	work := make(chan int, n)
	for i := range n {
		work <- i
	}
	close(work)
	codes := make([]int, n)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				code, err := e.send(fmt.Sprint("evt_free_", i))
				if err != nil {
					t.Error(err)
				}
				codes[i] = code
			}
		})
	}
	wg.Wait() // each request ends by the receiver's store timeout
	for i, code := range codes {
		if code != 200 {
			t.Errorf("unrelated evt_free_%d answered %d while evt_locked is locked, want 200", i, code)
		}
	}
	var free int
	if err := e.db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_events WHERE event_id LIKE 'evt_free_%'`).Scan(&free); err != nil {
		t.Fatal(err)
	}
	// The test's transaction still holds the key.
	var one int
	if err := tx.QueryRow(`SELECT 1`).Scan(&one); err != nil {
		t.Fatalf("the locking transaction ended early: %v", err)
	}
	if free != n {
		t.Fatalf("%d of %d unrelated events stored while the lock is held", free, n)
	}
	stopRetries()
	mu.Lock()
	t.Logf("deliveries of the locked event while locked: %v", blocked)
	if blocked[200] != 0 {
		t.Errorf("the locked event was answered 200 %d times before its key was free", blocked[200])
	}
	mu.Unlock()

	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// The provider's next retry stores it (or finds it stored).
	code, err := e.send("evt_locked")
	if err != nil || code != 200 {
		t.Fatalf("evt_locked after the lock was released = %d, %v; want 200", code, err)
	}
	if evs, jobs := e.counts(t); evs != n+1 || jobs != n+1 {
		t.Fatalf("%d events and %d jobs, want %d and %d", evs, jobs, n+1, n+1)
	}
}
