package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockactor/lockactor"
)

var fairCommand = command{
	name:    "fair",
	summary: "waiters on different instances are granted the lock in the order they asked",
	doc: "A holder takes a FairLock; --waiters waiters, each on its own instance (its\n" +
		"own lockactor.Client), ask for it one after another in an order shuffled by\n" +
		"--seed (each asks once the previous one is queued in Redis). Then the holder\n" +
		"releases, and each waiter holds for --hold in turn. The grant order must\n" +
		"equal the request order.",
	common: flagRedis | flagSeed | flagTimeline,
	new:    func() scenario { return new(fairDemo) },
}

// fairDemo is the fair scenario and its flags.
type fairDemo struct {
	waiters int
	hold    time.Duration
}

func (d *fairDemo) define(fs *flag.FlagSet) {
	fs.IntVar(&d.waiters, "waiters", 5, "waiters, each on its own instance")
	fs.DurationVar(&d.hold, "hold", 100*time.Millisecond, "how long the holder and each waiter hold the lock")
}

func (d *fairDemo) check(*options) error {
	return firstErr(atLeast("waiters", d.waiters, 2), positiveDur("hold", d.hold))
}

// queueTimeout bounds the wait for one waiter to show up in the Redis queue.
const queueTimeout = 5 * time.Second

// fairJSON is the --json form of a fair run.
type fairJSON struct {
	Scenario  string   `json:"scenario"`
	Backend   string   `json:"backend"`
	Seed      uint64   `json:"seed"`
	Requested []string `json:"requested"`
	Granted   []string `json:"granted"`
	OK        bool     `json:"ok"`
}

// fairOwner is one waiter (or the holder) and what happened to it.
type fairOwner struct {
	name                string
	lock                *lockactor.Lock
	asked, got, release time.Duration // since the scenario began
}

func (d *fairDemo) run(ctx context.Context, e *env) error {
	clients, err := newClients(e.be.rdb, d.waiters+1)
	if err != nil {
		return err
	}
	defer closeAll(clients)
	name := e.key("lock")
	e.logf("fair: a holder and %d waiters on %d instances, hold %v, seed %d, against %s",
		d.waiters, len(clients), d.hold, e.opts.seed, e.backendDesc())

	holder := &fairOwner{name: "holder", lock: clients[0].FairLock(name)}
	order := rand.New(rand.NewPCG(e.opts.seed, 0)).Perm(d.waiters)
	var waiters []*fairOwner
	for _, i := range order {
		waiters = append(waiters, &fairOwner{name: fmt.Sprintf("w%d", i+1), lock: clients[i+1].FairLock(name)})
	}

	if err := holder.lock.Lock(ctx); err != nil {
		return err
	}
	holder.got = e.since()
	e.eventf("holder: Lock -> acquired")

	var mu sync.Mutex
	var granted []string
	var wg sync.WaitGroup
	errs := make(chan error, d.waiters)
	wctx, cancel := context.WithCancel(ctx) // cancelled to free the waiters when the scenario fails
	defer cancel()
	for i, w := range waiters {
		w.asked = e.since()
		wg.Go(func() {
			if err := w.lock.Lock(wctx); err != nil {
				errs <- err
				return
			}
			w.got = e.since()
			mu.Lock()
			granted = append(granted, w.name)
			mu.Unlock()
			e.eventf("%s: granted after waiting %v", w.name, (w.got - w.asked).Round(time.Millisecond))
			sleep(ctx, d.hold)
			w.release = e.since()
			errs <- unlockFor(ctx, w.lock)
		})
		if err := waitQueued(ctx, w.lock, i+1); err != nil {
			cancel()
			wg.Wait()
			return err
		}
		e.eventf("%s: asks, queued at position %d", w.name, i+1)
	}
	sleep(ctx, d.hold)
	holder.release = e.since()
	e.eventf("holder: Unlock")
	if err := unlockFor(ctx, holder.lock); err != nil {
		cancel()
		wg.Wait()
		return err
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}

	res := fairJSON{Scenario: "fair", Backend: e.backendDesc(), Seed: e.opts.seed, Granted: granted}
	for _, w := range waiters {
		res.Requested = append(res.Requested, w.name)
	}
	res.OK = slices.Equal(res.Requested, res.Granted)
	if err := e.saveTimeline(fairTimeline(holder, waiters, e.since())); err != nil {
		return err
	}
	if err := e.result(res, func(w io.Writer) {
		fmt.Fprintf(w, "requested: %s\n", strings.Join(res.Requested, " "))
		fmt.Fprintf(w, "granted:   %s\n", strings.Join(res.Granted, " "))
		fmt.Fprintf(w, "FIFO order: %s (grant order %s request order)\n", verdict(res.OK), map[bool]string{true: "==", false: "!="}[res.OK])
	}); err != nil {
		return err
	}
	if !res.OK {
		return fmt.Errorf("granted in order %v, requested %v", res.Granted, res.Requested)
	}
	return nil
}

// waitQueued waits until w stands n-th in the fair lock's Redis queue.
func waitQueued(ctx context.Context, w *lockactor.Lock, n int) error {
	deadline := time.Now().Add(queueTimeout)
	for {
		got, err := w.QueuePosition(ctx)
		switch {
		case err != nil:
			return fmt.Errorf("the fair queue: %w", err)
		case got >= n:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("waiter %d did not show up in the fair queue within %v", n, queueTimeout)
		}
		sleep(ctx, 2*time.Millisecond)
	}
}

// unlockFor unlocks l on a context of its own, so a Ctrl-C still releases.
func unlockFor(ctx context.Context, l *lockactor.Lock) error {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
	defer cancel()
	return l.Unlock(uctx)
}

// fairTimeline draws the lock's lane and one row per owner, in request order.
func fairTimeline(holder *fairOwner, waiters []*fairOwner, total time.Duration) *timeline {
	tl := &timeline{Title: "fair lock", Total: total,
		Subtitle: fmt.Sprintf("a holder and %d waiters on a FairLock: each waiter is granted in the order it asked (rows top to bottom)", len(waiters))}
	lane := tlRow{Label: "the lock: all holds", Lane: true}
	owners := append([]*fairOwner{holder}, waiters...)
	for _, o := range owners {
		lane.Spans = append(lane.Spans, tlSpan{Start: o.got, End: o.release, Kind: spanHold, Note: o.name})
	}
	tl.Rows = append(tl.Rows, lane)
	for _, o := range owners {
		row := tlRow{Label: o.name}
		if o != holder {
			row.Spans = append(row.Spans, tlSpan{Start: o.asked, End: o.got, Kind: spanWait, Note: o.name + " waits"})
		}
		row.Spans = append(row.Spans, tlSpan{Start: o.got, End: o.release, Kind: spanHold, Note: o.name + " holds"})
		tl.Rows = append(tl.Rows, row)
	}
	return tl
}
