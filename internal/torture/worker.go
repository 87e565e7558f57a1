package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/lockactor/lockactor"
)

// The workload's mix: how often a worker picks each kind of step (out of
// the sum). lockB is a plain Lock on a name of server B that MultiLocks also
// take, so MultiLock members meet single-lock contention too.
const (
	stepLock = iota
	stepFair
	stepFenced
	stepRW
	stepSem
	stepMulti
	stepLockB
	stepForce
	stepShared
	stepOwn
	stepSpin
	stepPermit
	stepLatch
	stepFairBurst
	stepClash
	stepMutex
	numSteps
)

var stepWeights = [numSteps]int{26, 12, 12, 16, 14, 10, 6, 1, 10, 4, 10, 10, 3, 6, 2, 10}

// Fixed leases are 1-4s for about a third; one in two is short (shortLease
// to shortLeaseMax), so that fault delays (up to twice shortLeaseMax, see
// Faults.draw and FaultLate) outlast them; one in ten is long (longLease to
// twice it) for about one in seven, so that it outlasts a settlement block and the 5s latch record
// of a final release before the fixes. A rare one is tiny (under
// tinyLeaseMax): shorter than a round trip under load, it can rarely be
// granted in time.
const (
	shortLease    = 200 * time.Millisecond
	shortLeaseMax = 400 * time.Millisecond
	longLease     = 6 * time.Second
)

// namesPerPrim is the pool of names per primitive: small, for contention.
const namesPerPrim = 3

// sharedPrims are the kinds a shared name is taken as. They exclude each
// other on one hash (each acquire script refuses while the hash exists), but
// a release of one kind wakes no waiter of another, so waits on shared names
// are not judged by the liveness check (see shared). ReadWriteLock is left
// out: its scripts look at the hash's mode field only, so a read or write
// hold is granted over a Lock's hold, and a Lock's last release deletes the
// readers' fields with the hash; the library inherits that from Redisson,
// and mixing the kinds would only show that.
var sharedPrims = [...]Prim{PrimLock, PrimFenced, PrimFair, PrimSpin}

// shared reports whether res is one of the names several kinds share.
func shared(res string) bool { return strings.Contains(res, "/shared") }

// plan is every random choice of one step, drawn up front in a fixed order
// so the n-th step of a worker is the same for a seed whatever earlier calls
// returned (only how many steps fit in the run varies).
type plan struct {
	step      int
	name      int
	nameB     int
	shape     int           // which call shape (see shapeOf)
	wait      time.Duration // TryLock/TryAcquire wait, 0-500ms
	lease     time.Duration // WithLease (see shortLease)
	cancel    time.Duration // early cancel, 0-50ms (+1ns so it is > 0)
	crit      time.Duration // critical section, 0-5ms
	long      bool          // a rare long critical section: the watchdog must renew
	longCrit  time.Duration // 1-5s
	extra     int           // reentrant re-locks, 1-2
	permits   int           // 1-2
	rwShape   int           // 0-99: read, write, write-then-read
	downgrade bool          // write-then-read: unlock the write view first
	deadlines [6]time.Duration
	// relock: after an Unlock that failed, the same handle locks again at
	// once (the failed release is still owed to Redis).
	relock bool
	// noDeadline: the step's Unlocks run without a deadline.
	noDeadline bool
	// sharedPrim: which kind a shared-name step takes the name as (see
	// sharedPrims).
	sharedPrim int
	// quickUnlock: the Unlock deadline (100-300ms) of a step that re-locks
	// after a fixed lease, a caller in a hurry.
	quickUnlock time.Duration
	// extend: a fixed-lease hold is extended (Lock.Extend) to extendLease
	// before its critical section (see extendLeaseOf).
	extend      bool
	extendLease time.Duration
	// edge: a fixed-lease hold's critical section runs to its lease's end
	// (LeaseUntil + edgeJitter, -5..+5ms), so that the Unlock races the
	// key's expiry in Redis and any deadline the runtime armed for that
	// end (after a master switch: endBy).
	edge       bool
	edgeJitter time.Duration
	// A latch round (see latchStep): its count (1-3), how many await it
	// (1-3), the pause before its last CountDown (2-20ms) and whether one
	// awaiter gives up early (at cancel).
	latchCount   int
	awaiters     int
	latchGap     time.Duration
	awaitGivesUp bool
	// latchReset: once the round's count reached zero, the worker sets it
	// again at once and one more Await (through the Client that awaited
	// first) gives up after resetAwait (150-250ms, longer than a
	// FaultSubDelay's lag) unless let go.
	latchReset bool
	resetAwait time.Duration
	// A fair burst (see fairBurstStep): how many more waiters of the
	// Client ask (2-4), burstGap apart (10-30ms).
	burst    int
	burstGap time.Duration
}

// drawPlan draws a step from weights (stepWeights, or a topology's mix)
// and every choice it may need.
func drawPlan(rng *rand.Rand, weights *[numSteps]int) plan {
	var p plan
	total := 0
	for _, w := range weights {
		total += w
	}
	for r := rng.IntN(total); r >= weights[p.step]; p.step++ {
		r -= weights[p.step]
	}
	p.name, p.nameB = rng.IntN(namesPerPrim), rng.IntN(namesPerPrim)
	p.shape = rng.IntN(100)
	p.wait = time.Duration(rng.Int64N(int64(500*time.Millisecond) + 1))
	p.lease = time.Second + time.Duration(rng.Int64N(int64(3*time.Second)+1))
	switch r := rng.IntN(100); {
	case r < 1:
		p.lease = time.Duration(rng.Int64N(int64(tinyLeaseMax))) + 1
	case r < 50:
		p.lease = shortLease + time.Duration(rng.Int64N(int64(shortLeaseMax-shortLease)+1))
	case r < 65:
		p.lease = longLease + time.Duration(rng.Int64N(int64(longLease)+1))
	}
	p.cancel = time.Duration(rng.Int64N(int64(50*time.Millisecond))) + 1
	p.crit = time.Duration(rng.Int64N(int64(5*time.Millisecond) + 1))
	p.long = rng.IntN(40) == 0
	p.longCrit = time.Second + time.Duration(rng.Int64N(int64(4*time.Second)+1))
	p.extra = 1 + rng.IntN(2)
	p.permits = 1 + rng.IntN(2)
	p.rwShape = rng.IntN(100)
	p.downgrade = rng.IntN(2) == 0
	for i := range p.deadlines {
		p.deadlines[i] = 500*time.Millisecond + time.Duration(rng.Int64N(int64(3500*time.Millisecond)+1))
	}
	p.relock = rng.IntN(2) == 0
	p.noDeadline = rng.IntN(4) == 0
	p.sharedPrim = rng.IntN(len(sharedPrims))
	p.quickUnlock = 100*time.Millisecond + time.Duration(rng.Int64N(int64(200*time.Millisecond)+1))
	p.extend = rng.IntN(3) == 0
	p.extendLease = extendLeaseOf(rng)
	p.latchCount, p.awaiters = 1+rng.IntN(3), 1+rng.IntN(3)
	p.latchGap = 2*time.Millisecond + time.Duration(rng.Int64N(int64(18*time.Millisecond)+1))
	p.awaitGivesUp = rng.IntN(4) == 0
	p.edge = rng.IntN(6) == 0
	p.edgeJitter = time.Duration(rng.Int64N(int64(10*time.Millisecond)+1)) - 5*time.Millisecond
	p.latchReset = rng.IntN(2) == 0
	p.resetAwait = 150*time.Millisecond + time.Duration(rng.Int64N(int64(100*time.Millisecond)+1))
	p.burst = 2 + rng.IntN(3)
	p.burstGap = 10*time.Millisecond + time.Duration(rng.Int64N(int64(20*time.Millisecond)+1))
	return p
}

// extendLeaseOf draws an Extend's lease like a grant's: short for half (a
// FaultLate window then delays its reply past it, and fault delays outlast
// it), 1-3 s otherwise, and, rarely, tiny (see tinyLeaseMax).
func extendLeaseOf(rng *rand.Rand) time.Duration {
	switch r := rng.IntN(100); {
	case r < 1:
		return time.Duration(rng.Int64N(int64(tinyLeaseMax))) + 1
	case r < 50:
		return shortLease + time.Duration(rng.Int64N(int64(shortLeaseMax-shortLease)+1))
	}
	return time.Second + time.Duration(rng.Int64N(int64(2*time.Second)+1))
}

// shape is one acquire call's form.
type shape struct {
	op        Op
	wait      time.Duration
	lease     time.Duration
	cancel    time.Duration
	reentrant bool
}

// shapeOf maps a plan to a call shape. Every form the API offers appears:
// Lock, TryLock (one attempt), TryLock with a wait, each with or without a
// fixed lease, a Lock whose caller gives up at a random point, and
// reentrant runs.
func shapeOf(p plan, reentrantOK bool) shape {
	switch s := p.shape; {
	case s < 20:
		return shape{op: OpLock}
	case s < 32:
		return shape{op: OpTryLock}
	case s < 48:
		return shape{op: OpTryLock, wait: p.wait}
	case s < 66:
		return shape{op: OpLock, lease: p.lease}
	case s < 74:
		return shape{op: OpTryLock, wait: p.wait, lease: p.lease}
	case s < 84:
		return shape{op: OpLock, cancel: p.cancel}
	case reentrantOK:
		return shape{op: OpLock, reentrant: true}
	}
	return shape{op: OpLock}
}

// edgeLeaseMax bounds the leases an edge step holds to their end: longer
// ones would idle a worker for most of a short run.
const edgeLeaseMax = 4 * time.Second

// toLeaseEnd is the critical section of an edge step (see plan.edge): it
// reports whether it ran one, sleeping until oh's fixed lease ends.
func toLeaseEnd(p plan, s shape, oh *openHold) bool {
	if !p.edge || s.lease <= 0 || s.lease > edgeLeaseMax {
		return false
	}
	time.Sleep(time.Until(oh.leaseUntil().Add(p.edgeJitter)))
	return true
}

// critical sleeps for the plan's critical section: short, or (rarely, and
// only without a fixed lease) long enough that the watchdog must renew.
func critical(p plan, s shape) {
	d := p.crit
	if p.long && s.lease == 0 {
		d = p.longCrit
	}
	time.Sleep(d)
}

// worker is one goroutine of the workload with its own random stream and its
// own handles: one owner per name (a handle is one owner, never shared).
type worker struct {
	r   *runner
	rec *recorder
	rng *rand.Rand
	ca  *client // its Client on server A
	cb  *client // its Client on server B
	// handles by "<prim>/<res>"; dropped after an ambiguous result so the
	// next step starts from a clean owner (see forget).
	locks  map[string]*lockactor.Lock
	rws    map[string]*lockactor.ReadWriteLock
	multis map[string]*multiHandle
	// latches counts this worker's latch rounds (each on a fresh name),
	// clashes its kind-clash steps (likewise).
	latches, clashes int
}

type multiHandle struct {
	ml     *lockactor.MultiLock
	la, lb *lockactor.Lock
}

func (w *worker) run() {
	for !w.r.stopping() {
		p := drawPlan(w.rng, w.r.weights())
		switch p.step {
		case stepLock:
			w.lockStep(p, PrimLock, w.ca, fmt.Sprintf("lock%d", p.name))
		case stepFair:
			w.lockStep(p, PrimFair, w.ca, fmt.Sprintf("fair%d", p.name))
		case stepFenced:
			w.lockStep(p, PrimFenced, w.ca, fmt.Sprintf("fenced%d", p.name))
		case stepLockB:
			w.lockStep(p, PrimLock, w.cb, fmt.Sprintf("mlb%d", p.nameB))
		case stepRW:
			w.rwStep(p)
		case stepSem:
			w.semStep(p)
		case stepMulti:
			w.multiStep(p)
		case stepForce:
			w.forceStep(p)
		case stepShared:
			// One name taken as a Lock, a FencedLock or a FairLock through
			// the same Client: three actors of one Client on one hash. Half
			// of them reentrant, so that a partial release sent twice
			// would free the name under its owner.
			if p.shape%2 == 0 {
				p.shape = 99
			}
			w.lockStep(p, sharedPrims[p.sharedPrim], w.ca, fmt.Sprintf("shared%d", p.name))
		case stepMutex:
			w.mutexStep(p)
		case stepSpin:
			w.lockStep(p, PrimSpin, w.ca, fmt.Sprintf("spin%d", p.name))
		case stepPermit:
			w.permitStep(p)
		case stepLatch:
			w.latchStep(p)
		case stepFairBurst:
			w.fairBurstStep(p)
		case stepClash:
			w.clashStep(p)
		case stepOwn:
			// A name nobody else takes, with a long fixed lease: its actor
			// has nothing else to do, so a release is its last request
			// (the latch record of which lived 5s before the fixes) while
			// the hold outlives a settlement block.
			p.shape, p.lease = 60, longLease+p.lease%longLease
			w.lockStep(p, PrimLock, w.ca, fmt.Sprintf("own%d", w.rec.g))
		}
	}
}

// lockHandle is this worker's handle (owner) on a lock name.
func (w *worker) lockHandle(prim Prim, cl *client, name string) *lockactor.Lock {
	k := handleKey(prim, cl, name)
	if l := w.locks[k]; l != nil {
		return l
	}
	var l *lockactor.Lock
	switch prim {
	case PrimFair:
		l = cl.c.FairLock(name)
	case PrimFenced:
		l = cl.c.FencedLock(name)
	case PrimSpin:
		l = cl.c.SpinLock(name)
	default:
		l = cl.c.Lock(name)
	}
	w.locks[k] = l
	return l
}

// forget drops a handle after a result that leaves its owner's state in
// Redis unknown (a Redis error, ErrNotHeld, a failed Unlock): a user cannot
// tell what such an owner holds either, and a fresh owner keeps every later
// hold of this worker unambiguous in the log.
func (w *worker) forget(prim Prim, cl *client, name string) {
	delete(w.locks, handleKey(prim, cl, name))
}

func handleKey(prim Prim, cl *client, name string) string {
	return fmt.Sprintf("%s/%s/%s", prim, cl.server, name)
}

// acquireLock makes one acquire call of shape s on l (a handle of cl) and
// records it.
func (w *worker) acquireLock(cl *client, l *lockactor.Lock, prim Prim, res, owner string, s shape, deadline time.Duration) (Outcome, int) {
	c := Call{Client: cl.name, Prim: prim, Op: s.op, Res: []string{res}, Owners: []string{owner}, Wait: s.wait, Lease: s.lease,
		Waiting: (s.op == OpLock || s.wait > 0) && !shared(res) && !tinyLease(s.lease)}
	cc := newCallCtx(deadline, s.cancel)
	defer cc.done()
	return w.rec.do(c, cc, func(ctx context.Context) (bool, error) { return lockCall(ctx, l, s) })
}

// lockCall runs the API call shape s asks for.
func lockCall(ctx context.Context, l lockactor.Locker, s shape) (bool, error) {
	var opts []lockactor.LockOption
	if s.lease > 0 {
		opts = append(opts, lockactor.WithLease(s.lease))
	}
	if s.op == OpLock {
		err := l.Lock(ctx, opts...)
		return err == nil, err
	}
	if s.wait > 0 {
		opts = append(opts, lockactor.WithWait(s.wait))
	}
	return l.TryLock(ctx, opts...)
}

// extend makes one Extend call on l (a handle of cl, holding h with a fixed
// lease) and records it; the hold's lease bounds follow what it returned.
func (w *worker) extend(cl *client, l *lockactor.Lock, prim Prim, res, owner string, lease, deadline time.Duration, h *openHold) Outcome {
	c := Call{Client: cl.name, Prim: prim, Op: OpExtend, Res: []string{res}, Owners: []string{owner}, Lease: lease}
	cc := newCallCtx(deadline, 0)
	defer cc.done()
	out, ci := w.rec.do(c, cc, func(ctx context.Context) (bool, error) { return true, l.Extend(ctx, lease) })
	h.extended(ci)
	return out
}

// unlock makes one Unlock call on l (a handle of cl) and records it; a
// deadline of 0 means none (context.Background's).
func (w *worker) unlock(cl *client, l lockactor.Locker, prim Prim, res, owners []string, deadline time.Duration) (Outcome, int) {
	c := Call{Client: cl.name, Prim: prim, Op: OpUnlock, Res: res, Owners: owners}
	cc := newCallCtx(deadline, 0)
	defer cc.done()
	return w.rec.do(c, cc, func(ctx context.Context) (bool, error) { return true, l.Unlock(ctx) })
}
