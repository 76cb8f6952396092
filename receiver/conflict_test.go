package receiver_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/store"
)

// A signed redelivery of an event with another body is answered 200
// duplicate (so the provider stops), the first body is kept, and
// event_body_conflict is raised once, whatever the number of conflicting
// deliveries, through the group committer's batches.
func TestConflictingRedelivery(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnvWith(t, dbURL, nil, true, newSecret)
		first := body("evt_1", "test")
		other := bytes.Replace(first, []byte(`"chk_1"`), []byte(`"chk_2"`), 1)
		if status, answer := e.post(t, "billete-test", first, newSecret, time.Now()); status != 200 || answer["status"] != "stored" {
			t.Fatalf("first delivery: %d %v, want 200 stored", status, answer)
		}
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				b := other
				if i%2 == 0 {
					b = first // identical redeliveries mixed in
				}
				if status, answer := e.post(t, "billete-test", b, newSecret, time.Now()); status != 200 || answer["status"] != "duplicate" {
					t.Errorf("redelivery: %d %v, want 200 duplicate", status, answer)
				}
			})
		}
		wg.Wait()
		evs, err := e.db.ListEvents(context.Background(), store.Filter{})
		if err != nil || len(evs) != 1 || !bytes.Equal(evs[0].Payload, first) {
			t.Fatalf("stored events = %d, %v; want the first body only", len(evs), err)
		}
		var n, count int
		var subject, msg string
		if err := e.db.SQL.QueryRow(`SELECT COUNT(*), MIN(subject), MIN(message), MIN(count) FROM payhook_alerts WHERE kind = $1`,
			store.AlertEventBodyConflict).Scan(&n, &subject, &msg, &count); err != nil {
			t.Fatal(err)
		}
		if n != 1 || count != 1 || subject != "billete-test/evt_1" ||
			!strings.Contains(msg, fmt.Sprintf("%x", sha256.Sum256(first))) || !strings.Contains(msg, fmt.Sprintf("%x", sha256.Sum256(other))) {
			t.Fatalf("%d alerts (%s, count %d: %q); want one, raised once, with both digests", n, subject, count, msg)
		}
	})
}
