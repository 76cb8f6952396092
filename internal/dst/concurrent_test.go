package dst

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Two payhook instances on one database: two receivers (group commit
// batches of their own) and two step drivers. Their statements interleave
// in an order the seed chooses, still one seed, one run: each instance
// runs as an actor that parks at every statement it sends outside a
// transaction and at every transaction's begin, and the harness lets one
// actor go at a time, to its next park. A transaction runs whole once
// begun: SQLite has one writer, so what two instances can interleave is a
// read outside a transaction (a look before a write) and the
// transactions, which is where a check-then-insert or a claim without its
// condition goes wrong. PostgreSQL runs the same order.

// concPlan is what a seed chose for concurrency, drawn from a stream of
// its own (the rest of the plan stays what it was).
type concPlan struct {
	instances int // 1, or 2 on one database
	// sweepFirst runs the sweep before River's rescuer (both are
	// periodic and independent in production): a job left running by a
	// crash then gets a stand-in before it is itself retried, two live
	// jobs for one event.
	sweepFirst bool
	// freezes maps step rounds of the two instances to the park at which
	// one of them freezes (a process stopped mid-job: a long GC pause, a
	// VM migrated, a network cut), for freezeFor: long enough for River's
	// rescuer and the sweep to take its job for a dead process's.
	freezes   map[int]int
	freezeFor time.Duration
	// fetchFreeze is the probability that an instance freezes in the
	// middle of a call to the provider's API.
	fetchFreeze float64
}

func newConcPlan(seed int64) (concPlan, *rand.Rand) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0xc0c))
	p := concPlan{instances: 1, sweepFirst: rng.IntN(2) == 0}
	if rng.IntN(3) != 0 {
		p.instances = 2
	}
	p.freezes = map[int]int{}
	for range rng.IntN(12) {
		p.freezes[1+rng.IntN(60)] = 1 + rng.IntN(8)
	}
	p.freezeFor = 50*time.Second + time.Duration(rng.Int64N(int64(3*time.Minute)))
	p.fetchFreeze = rng.Float64() * 0.15
	return p, rng
}

func (p concPlan) String() string {
	return fmt.Sprintf("%d instances, sweep before rescue %v, freezes %v and in %.3f of the API calls, for %s",
		p.instances, p.sweepFirst, p.freezes, p.fetchFreeze, p.freezeFor.Round(time.Second))
}

type actorKey struct{}

// actor is one instance's goroutine under the scheduler.
type actor struct {
	id    int
	s     *scheduler
	wake  chan struct{}
	done  bool
	panic any
	// freezeMe: the actor parks to be frozen (in its call to the
	// provider), not at a statement.
	freezeMe bool
}

type scheduler struct {
	ice     *frozen // the actor frozen in this round, if any
	thawed  bool    // no actor may freeze (one is frozen already)
	arrive  chan *actor
	aborted bool // set before the actors are woken for good: gates open
}

// gate parks the calling actor, if any, until the harness lets it go; it
// returns an error once the run is being abandoned.
func gate(ctx context.Context) error {
	a, _ := ctx.Value(actorKey{}).(*actor)
	if a == nil {
		return nil
	}
	a.s.arrive <- a
	<-a.wake
	if a.s.aborted {
		return errCrashed
	}
	return nil
}

// together runs fns as actors, one at a time from park to park, in an
// order drawn from rng, until all have returned. A panic in one (a broken
// invariant) is raised in the caller once every actor has returned. When
// freezeAt is above zero, the actor that parks freezeAt-th is frozen
// there instead, and so is one that asks to (freezeMe, in its call to the
// provider): together returns it, parked, for the harness to thaw later
// (or abandon, at a crash). A freezeAt below zero freezes none.
func together(ctx context.Context, rng *rand.Rand, freezeAt int, fns ...func(ctx context.Context)) *frozen {
	s := &scheduler{arrive: make(chan *actor), thawed: freezeAt < 0}
	parked := make([]*actor, len(fns))
	for i, fn := range fns {
		a := &actor{id: i, s: s, wake: make(chan struct{})}
		parked[i] = a
		go func() {
			defer func() {
				a.panic = recover()
				a.done = true
				s.arrive <- a
			}()
			<-a.wake
			fn(context.WithValue(ctx, actorKey{}, a))
		}()
	}
	var raised any
	parks := 0
	for len(parked) > 0 {
		i := rng.IntN(len(parked))
		if s.aborted {
			i = 0
		}
		a := parked[i]
		parked = slices.Delete(parked, i, i+1)
		a.wake <- struct{}{}
		b := <-s.arrive
		if b != a {
			panic("dst: an actor ran while another was let go")
		}
		switch {
		case b.panic != nil:
			raised = cmpOr(raised, b.panic)
			s.aborted = true
		case !b.done:
			parks++
			if (parks == freezeAt || b.freezeMe) && s.ice == nil {
				b.freezeMe = false
				s.ice = &frozen{a: b}
				continue
			}
			b.freezeMe = false
			i, _ := slices.BinarySearchFunc(parked, b.id, func(x *actor, id int) int { return x.id - id })
			parked = slices.Insert(parked, i, b)
		}
	}
	if raised != nil {
		if s.ice != nil {
			s.ice.abandon()
		}
		panic(raised)
	}
	return s.ice
}

// frozen is an actor frozen at a park.
type frozen struct {
	a     *actor
	until time.Time
}

// thaw lets the frozen actor go on alone to its end, and raises its
// panic, if any.
func (f *frozen) thaw() {
	for {
		f.a.wake <- struct{}{}
		b := <-f.a.s.arrive
		if b.done {
			if b.panic != nil {
				panic(b.panic)
			}
			return
		}
	}
}

// abandon ends the frozen actor: its park and every later one fail.
func (f *frozen) abandon() {
	f.a.s.aborted = true
	for {
		f.a.wake <- struct{}{}
		if b := <-f.a.s.arrive; b.done {
			return
		}
	}
}

func cmpOr(a, b any) any {
	if a != nil {
		return a
	}
	return b
}
