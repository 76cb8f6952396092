package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/payhook/payhook/store"
)

// readyTimeout bounds the readiness probe, so that /readyz answers within
// a second whatever the database does.
const readyTimeout = 800 * time.Millisecond

// readyFresh is how long /readyz answers from a probe that succeeded.
const readyFresh = time.Second

// readiness answers /readyz: 200 when a committed write to the database
// returned within readyTimeout, 503 otherwise. A ping is not enough: a
// SQLite connection busy for seconds, a partitioned PostgreSQL or a full
// disk all answer pings, and none of them can store a webhook.
type readiness struct {
	db      *store.DB
	now     func() time.Time
	log     *slog.Logger
	timeout time.Duration
	// probing is set while a probe runs. A probe that outlived its
	// deadline (a driver that does not stop at once) makes later checks
	// answer 503 at once instead of piling probes up on the database.
	probing atomic.Bool
	// fresh is how long a probe that succeeded answers for the checks
	// after it, so that anyone polling /readyz (unauthenticated) costs the
	// database one durable write per fresh at most; ok is when it ended,
	// as nanoseconds since start on the monotonic clock (a wall clock
	// stepped back would stretch fresh by the step), 0 for never.
	fresh time.Duration
	start time.Time
	ok    atomic.Int64
	// down is set by a check answered 503, cleared by the next probe
	// that succeeds, which says so in the log: the warnings of an outage
	// then have their end.
	down atomic.Bool
}

func (rd *readiness) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if at := rd.ok.Load(); at > 0 && time.Since(rd.start)-time.Duration(at) < rd.fresh {
		fmt.Fprintln(w, "ready")
		return
	}
	if !rd.probing.CompareAndSwap(false, true) {
		rd.notReady(w, "the previous readiness probe has not returned yet")
		return
	}
	done := make(chan error, 1)
	go func() {
		defer rd.probing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), rd.timeout)
		defer cancel()
		done <- rd.db.ProbeWrite(ctx, rd.now())
	}()
	timer := time.NewTimer(rd.timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			rd.notReady(w, fmt.Sprintf("database did not take a write: %v", err))
			return
		}
		rd.ok.Store(max(1, int64(time.Since(rd.start))))
		if rd.down.Swap(false) {
			rd.log.Info("ready again: the database takes writes")
		}
		fmt.Fprintln(w, "ready")
	case <-timer.C:
		rd.notReady(w, fmt.Sprintf("database did not take a write within %v", rd.timeout))
	case <-r.Context().Done():
	}
}

// notReady answers 503. The reason goes to the log only: /readyz is
// unauthenticated and a driver's error may name hosts and files.
func (rd *readiness) notReady(w http.ResponseWriter, reason string) {
	rd.down.Store(true)
	rd.log.Warn("not ready", "reason", reason)
	http.Error(w, "not ready: the database does not take writes in time", http.StatusServiceUnavailable)
}
