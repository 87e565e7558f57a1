package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockactor/lockactor"
)

var contentionCommand = command{
	name:    "contention",
	summary: "instances x goroutines contend for a few locks; checks mutual exclusion",
	doc: "Simulates --procs service instances, each its own lockactor.Client, with\n" +
		"--goroutines workers each. Every worker has its own *Lock handle per name and\n" +
		"loops for --duration: pick a name, Lock, hold for --hold, Unlock. Every\n" +
		"critical section is logged with its start, end and owner, and the logs are\n" +
		"checked for overlaps at the end: the verdict is measured, not assumed.\n" +
		"The summary ends with a few of the Clients' OpenTelemetry metrics, read\n" +
		"in-process (WithMeterProvider and the SDK's manual reader).\n" +
		"Progress goes to stderr, the summary to stdout.",
	common:   flagRedis | flagDuration | flagSeed | flagTimeline,
	duration: 5 * time.Second,
	new:      func() scenario { return new(contention) },
}

// unlockTimeout bounds one Unlock. Unlock runs on a context of its own: a
// worker whose Lock succeeded just before the run ended must still release.
const unlockTimeout = 5 * time.Second

// contention is the contention scenario and its flags.
type contention struct {
	procs, goroutines, keys int
	hold                    time.Duration
}

func (c *contention) define(fs *flag.FlagSet) {
	fs.IntVar(&c.procs, "procs", 3, "simulated service instances, each its own lockactor.Client")
	fs.IntVar(&c.goroutines, "goroutines", 8, "worker goroutines per instance")
	fs.IntVar(&c.keys, "keys", 2, "distinct lock names to contend for")
	fs.DurationVar(&c.hold, "hold", time.Millisecond, "length of each critical section")
}

func (c *contention) check(*options) error {
	err := firstErr(atLeast("procs", c.procs, 1), atLeast("goroutines", c.goroutines, 1), atLeast("keys", c.keys, 1))
	if err == nil && c.hold < 0 {
		err = fmt.Errorf("--hold must not be negative, got %v", c.hold)
	}
	return err
}

// span is one critical section on the monotonic clock relative to the run's
// epoch: asked when Lock was called, start when it returned, end before
// Unlock was called. If the lock excludes, spans of one name never overlap.
type span struct {
	asked, start, end time.Duration
	owner             int // worker id
}

// arena is the state the workers share.
type arena struct {
	epoch    time.Time
	hold     time.Duration
	inside   []atomic.Int32 // per lock name: workers in its critical section now
	doubles  atomic.Int64   // entries that found another worker already inside
	acquired atomic.Int64
	waiting  atomic.Int32 // workers inside Lock now
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

// run runs the scenario and prints its summary. It fails when a lock call
// failed or mutual exclusion was violated.
func (c *contention) run(ctx context.Context, e *env) error {
	dm := newDemoMetrics()
	defer dm.close()
	clients, err := newClients(e.be.rdb, c.procs, dm.option())
	if err != nil {
		return err
	}
	defer closeAll(clients)

	names := make([]string, c.keys)
	for k := range names {
		names[k] = e.key(fmt.Sprint(k))
	}
	workers := c.newWorkers(clients, names, e.opts.seed)

	deadline, cancel := context.WithTimeout(ctx, e.opts.duration)
	defer cancel()
	runCtx, abort := context.WithCancelCause(deadline)
	defer abort(nil)
	a := &arena{epoch: time.Now(), hold: c.hold, inside: make([]atomic.Int32, c.keys), abort: abort}

	fmt.Fprintf(e.stderr, "contention: %d instances x %d goroutines on %d locks, hold %v, for %v against %s\n",
		c.procs, c.goroutines, c.keys, c.hold, e.opts.duration, e.backendDesc())
	cmds0 := e.be.commands.Sent()
	stopProgress := startProgress(e.stderr, a)
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() { w.loop(runCtx, a) })
	}
	wg.Wait()
	elapsed := time.Since(a.epoch)
	stopProgress()
	snap := dm.collect(ctx)

	res := collect(workers, names, a, elapsed)
	res.commands = e.be.commands.Sent() - cmds0
	res.interrupted = ctx.Err() != nil
	if err := e.saveTimeline(res.timeline(c, workers, names)); err != nil {
		return err
	}
	if err := e.result(res.jsonResult(c, e), func(w io.Writer) { res.print(w, c, e); snap.print(w) }); err != nil {
		return err
	}
	if e.opts.json {
		snap.print(e.stderr) // stdout holds one JSON object
	}
	switch {
	case a.failure != nil:
		return a.failure
	case res.violated():
		return errors.New("mutual exclusion violated")
	}
	return nil
}

// newWorkers makes c.goroutines workers per client, each with its own
// handles and its own random source derived from seed.
func (c *contention) newWorkers(clients []*lockactor.Client, names []string, seed uint64) []*worker {
	var workers []*worker
	for p, cl := range clients {
		for g := range c.goroutines {
			id := len(workers)
			w := &worker{
				id: id, proc: p, name: fmt.Sprintf("i%d/g%d", p, g),
				rng:   rand.New(rand.NewPCG(seed, uint64(id))),
				locks: make([]*lockactor.Lock, len(names)),
				spans: make([][]span, len(names)),
			}
			for k, name := range names {
				w.locks[k] = cl.Lock(name)
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
	a.waiting.Add(1)
	err := l.Lock(ctx)
	a.waiting.Add(-1)
	if err != nil {
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
	w.spans[k] = append(w.spans[k], span{asked: asked.Sub(a.epoch), start: start.Sub(a.epoch), end: end.Sub(a.epoch), owner: w.id})
	a.acquired.Add(1)

	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
	defer cancel()
	return l.Unlock(uctx)
}
