package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
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
	numSteps
)

var stepWeights = [numSteps]int{26, 12, 12, 16, 14, 10, 6, 1, 10}

// Fixed leases are mostly 1-4s; one in three is short (shortLease to
// shortLeaseMax), so that fault delays (up to twice shortLeaseMax, see
// Faults.draw) outlast them. A rare one is below MinLease, which the
// library must refuse.
const (
	shortLease    = 200 * time.Millisecond
	shortLeaseMax = 400 * time.Millisecond
)

// namesPerPrim is the pool of names per primitive: small, for contention.
const namesPerPrim = 3

// plan is every random choice of one step, drawn up front in a fixed order
// so the n-th step of a worker is the same for a seed whatever earlier calls
// returned (only how many steps fit in the run varies).
type plan struct {
	step      int
	name      int
	nameB     int
	shape     int           // which call shape (see shapeOf)
	wait      time.Duration // TryLock/TryAcquire wait, 0-500ms
	lease     time.Duration // WithLease, 1-4s
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
	fenced     bool // a shared-name step takes the name as a FencedLock
}

func drawPlan(rng *rand.Rand) plan {
	var p plan
	total := 0
	for _, w := range stepWeights {
		total += w
	}
	for r := rng.IntN(total); r >= stepWeights[p.step]; p.step++ {
		r -= stepWeights[p.step]
	}
	p.name, p.nameB = rng.IntN(namesPerPrim), rng.IntN(namesPerPrim)
	p.shape = rng.IntN(100)
	p.wait = time.Duration(rng.Int64N(int64(500*time.Millisecond) + 1))
	p.lease = time.Second + time.Duration(rng.Int64N(int64(3*time.Second)+1))
	switch r := rng.IntN(100); {
	case r < 1:
		p.lease = time.Duration(rng.Int64N(int64(lockactor.MinLease))) + 1 // refused
	case r < 34:
		p.lease = shortLease + time.Duration(rng.Int64N(int64(shortLeaseMax-shortLease)+1))
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
	p.fenced = rng.IntN(2) == 0
	return p
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
	case s < 22:
		return shape{op: OpLock}
	case s < 36:
		return shape{op: OpTryLock}
	case s < 54:
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
}

type multiHandle struct {
	ml     *lockactor.MultiLock
	la, lb *lockactor.Lock
}

func (w *worker) run() {
	for !w.r.stopping() {
		p := drawPlan(w.rng)
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
			// One name taken as a Lock or a FencedLock through the same
			// Client: two actors of one Client on one hash.
			prim := PrimLock
			if p.fenced {
				prim = PrimFenced
			}
			w.lockStep(p, prim, w.ca, fmt.Sprintf("shared%d", p.name))
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
		Waiting: s.op == OpLock || s.wait > 0}
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

// unlock makes one Unlock call on l (a handle of cl) and records it; a
// deadline of 0 means none (context.Background's).
func (w *worker) unlock(cl *client, l lockactor.Locker, prim Prim, res, owners []string, deadline time.Duration) (Outcome, int) {
	c := Call{Client: cl.name, Prim: prim, Op: OpUnlock, Res: res, Owners: owners}
	cc := newCallCtx(deadline, 0)
	defer cc.done()
	return w.rec.do(c, cc, func(ctx context.Context) (bool, error) { return true, l.Unlock(ctx) })
}
