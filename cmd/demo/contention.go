package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
)

// lockPrefix keeps the demo's lock names apart from other keys on a shared
// server.
const lockPrefix = "lockactor-demo:contention:"

// unlockTimeout bounds one Unlock. Unlock runs on a context of its own: a
// worker whose Lock succeeded just before the run ended must still release.
const unlockTimeout = 5 * time.Second

// span is one critical section, timed from the moment Lock returned to the
// moment before Unlock was called, on the monotonic clock relative to the
// run's epoch. If the lock excludes, spans of one name never overlap.
type span struct {
	start, end time.Duration
	owner      int // worker id
}

// arena is the state the workers share.
type arena struct {
	epoch    time.Time
	hold     time.Duration
	inside   []atomic.Int32 // per lock name: workers in its critical section now
	doubles  atomic.Int64   // entries that found another worker already inside
	acquired atomic.Int64
	abort    context.CancelCauseFunc

	failOnce sync.Once
	failure  error // the first unexpected error; read after the workers are done
}

// fail records err as the run's failure and stops every worker.
func (a *arena) fail(err error) {
	a.failOnce.Do(func() {
		a.failure = err
		a.abort(err)
	})
}

// worker is one goroutine of one simulated instance.
type worker struct {
	id, proc int
	name     string            // "i<proc>/g<n>", for reports
	rng      *rand.Rand        // picks the lock name of each round
	locks    []*lockactor.Lock // one handle per name, used by this worker only
	waits    []time.Duration   // how long each successful Lock took
	spans    [][]span          // per lock name
	lost     int               // holds whose Lost channel closed before Unlock
}

// runContention runs the contention scenario described in the package doc
// and prints its summary. It returns an error when a lock call failed or
// mutual exclusion was violated.
func runContention(ctx context.Context, e *env) error {
	cfg := e.cfg
	clients, err := newClients(e.rdb, cfg.procs)
	if err != nil {
		return err
	}
	defer closeAll(clients)

	names := make([]string, cfg.keys)
	for k := range names {
		names[k] = fmt.Sprintf("%s%d", lockPrefix, k)
	}
	workers := newWorkers(clients, names, cfg)

	deadline, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	runCtx, abort := context.WithCancelCause(deadline)
	defer abort(nil)
	a := &arena{epoch: time.Now(), hold: cfg.hold, inside: make([]atomic.Int32, cfg.keys), abort: abort}

	fmt.Fprintf(e.stderr, "contention: %d instances x %d goroutines on %d locks, hold %v, for %v against %s\n",
		cfg.procs, cfg.goroutines, cfg.keys, cfg.hold, cfg.duration, e.backend)
	stopProgress := reportProgress(e.stderr, a)
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() { w.loop(runCtx, a) })
	}
	wg.Wait()
	elapsed := time.Since(a.epoch)
	stopProgress()

	res := collect(workers, names, a, elapsed)
	res.print(e.stdout, e, ctx.Err() != nil)
	switch {
	case a.failure != nil:
		return a.failure
	case res.violated():
		return errors.New("mutual exclusion violated")
	}
	return nil
}

// newClients makes one lockactor.Client per simulated instance.
func newClients(rdb redis.UniversalClient, n int) ([]*lockactor.Client, error) {
	clients := make([]*lockactor.Client, 0, n)
	for range n {
		c, err := lockactor.New(rdb)
		if err != nil {
			closeAll(clients)
			return nil, fmt.Errorf("lockactor.New: %w", err)
		}
		clients = append(clients, c)
	}
	return clients, nil
}

func closeAll(clients []*lockactor.Client) {
	for _, c := range clients {
		_ = c.Close()
	}
}

// newWorkers makes cfg.goroutines workers per client, each with its own
// handles and its own random source derived from cfg.seed.
func newWorkers(clients []*lockactor.Client, names []string, cfg config) []*worker {
	var workers []*worker
	for p, c := range clients {
		for g := range cfg.goroutines {
			id := len(workers)
			w := &worker{
				id: id, proc: p, name: fmt.Sprintf("i%d/g%d", p, g),
				rng:   rand.New(rand.NewPCG(cfg.seed, uint64(id))),
				locks: make([]*lockactor.Lock, len(names)),
				spans: make([][]span, len(names)),
			}
			for k, name := range names {
				w.locks[k] = c.Lock(name)
			}
			workers = append(workers, w)
		}
	}
	return workers
}

// loop runs rounds until ctx ends or a round fails.
func (w *worker) loop(ctx context.Context, a *arena) {
	for ctx.Err() == nil {
		if err := w.round(ctx, a); err != nil {
			if ctx.Err() == nil {
				a.fail(fmt.Errorf("worker %s: %w", w.name, err))
			}
			return
		}
	}
}

// round takes one random lock, runs the critical section and releases it.
func (w *worker) round(ctx context.Context, a *arena) error {
	k := w.rng.IntN(len(w.locks))
	l := w.locks[k]
	asked := time.Now()
	if err := l.Lock(ctx); err != nil {
		return err
	}
	start := time.Now()
	w.waits = append(w.waits, start.Sub(asked))

	if a.inside[k].Add(1) > 1 {
		a.doubles.Add(1)
	}
	if a.hold > 0 {
		time.Sleep(a.hold)
	}
	a.inside[k].Add(-1)
	end := time.Now()

	select {
	case <-l.Lost():
		w.lost++
	default:
	}
	w.spans[k] = append(w.spans[k], span{start: start.Sub(a.epoch), end: end.Sub(a.epoch), owner: w.id})
	a.acquired.Add(1)

	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
	defer cancel()
	return l.Unlock(uctx)
}

// reportProgress prints one line a second to w until the returned stop is
// called; stop returns once the printing goroutine has exited.
func reportProgress(w io.Writer, a *arena) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var last int64
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				n := a.acquired.Load()
				fmt.Fprintf(w, "  %3.0fs  acquisitions %8d  (+%d/s)  double entries %d\n",
					now.Sub(a.epoch).Seconds(), n, n-last, a.doubles.Load())
				last = n
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
