package actors

import (
	"sync"
	"time"

	"github.com/lockactor/lockactor/internal/syncx"
)

// workerPool is the runtime's protoactor Dispatcher: it hands a mailbox's
// batch to an idle worker, or starts one, and a worker stays workerIdle
// for more. protoactor's default starts a goroutine per batch, whose small
// stack then grows (and is copied) inside go-redis on every lock operation.
//
// Note: running an idle actor on the posting goroutine instead (protoactor's
// synchronized dispatcher) was measured and not taken (bench/RESULTS.md,
// "Uncontended: where the extra 50 µs of a pair go"): it saved little, it
// would run actors inside redisio's pub/sub delivery, which holds the lock
// an actor's subscribe takes, and it would leave a caller's goroutine stuck
// in go-redis on a hung server, deaf to its ctx.
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
