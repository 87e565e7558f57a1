package actors

import (
	"sync"
	"time"

	"github.com/lockactor/lockactor/internal/syncx"
)

// workerPool is the runtime's protoactor Dispatcher. protoactor's default
// runs every mailbox batch on a fresh goroutine, whose small stack then grows
// (and is copied) inside go-redis on every lock operation; a profile of the
// uncontended path showed that copying among its top costs. The pool hands a
// batch to an idle worker, or starts one, and workers stay for a while.
//
// Running an idle actor's mailbox on the posting goroutine instead
// (protoactor's synchronized dispatcher) was measured and not taken: it
// removes two of the four goroutine hand-offs of a call, yet saved only
// ~4 µs of client CPU per uncontended pair (165 -> 161 µs; the ratio to raw
// moved 0.70x -> 0.77x in bench and +2 % in a same-process A/B), left
// manykeys even and one key with 256 goroutines lower (1.54x -> 1.42x raw;
// one bench run of 3 rounds each, 2 shared cores). Measured again with
// the batcher also sending an idle master's script on the actor's
// goroutine, so that an uncontended pair crossed no goroutine at all: the
// same ratio to raw (0.79x-0.83x; bench/RESULTS.md), so the hand-offs are
// not that gap. It would also run actors inside redisio's pub/sub
// delivery, which holds the PubSub lock that an actor's subscribe and
// unsubscribe take, and leave a caller's goroutine stuck in go-redis on a
// hung server, deaf to its ctx.
type workerPool struct {
	work       chan func() // unbuffered: a hand-off to an idle worker
	stop       chan struct{}
	wg         sync.WaitGroup
	mu         sync.Mutex // orders wg.Add against close
	closed     bool
	throughput int
}

// workerIdle is how long a worker waits for more work before it exits.
const workerIdle = 2 * time.Second

func newWorkerPool(throughput int) *workerPool {
	return &workerPool{work: make(chan func()), stop: make(chan struct{}), throughput: throughput}
}

// Schedule runs fn on an idle worker, or on a new one.
func (p *workerPool) Schedule(fn func()) {
	select {
	case p.work <- fn:
		return
	default:
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		go fn() // a straggler after Close: the actors are gone, it ends at once
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go p.worker(fn)
}

// Throughput is how many messages a mailbox processes before yielding.
func (p *workerPool) Throughput() int { return p.throughput }

func (p *workerPool) worker(fn func()) {
	defer p.wg.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		fn()
		idle.Reset(workerIdle)
		select {
		case fn = <-p.work:
		case <-idle.C:
			return
		case <-p.stop:
			return
		}
	}
}

// close stops idle workers and waits, until deadline, for busy ones to
// finish their batch. A worker stuck in a Redis call past the deadline ends
// when the call returns.
func (p *workerPool) close(deadline time.Time) {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	close(p.stop)
	syncx.WaitUntil(&p.wg, deadline)
}
