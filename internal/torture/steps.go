package torture

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lockactor/lockactor"
)

// bad reports an outcome after which the owner's state in Redis is unknown:
// the handle is dropped (see worker.forget).
func bad(out Outcome) bool {
	return out == OutRedis || out == OutNoQuorum || out == OutNotHeld || out == OutPanic || out == OutInvalid || out == OutClosed
}

// lockStep is one acquisition of a Lock, FairLock or FencedLock name by this
// worker's owner, a critical section and the release; reentrant shapes take
// the lock 2-3 times and unlock as often.
func (w *worker) lockStep(p plan, prim Prim, cl *client, name string) {
	l := w.lockHandle(prim, cl, name)
	owner := w.r.cfg.OwnerOf(l)
	res := cl.server + "/" + name
	s := shapeOf(p, true)
	out, ci := w.acquireLock(cl, l, prim, res, owner, s, p.deadlines[0])
	if out != OutOK {
		if bad(out) {
			w.forget(prim, cl, name)
		}
		return
	}
	h := w.grant(l, Hold{Prim: prim, Res: res, Owner: owner}, ci)
	count, dirty := 1, false
	if s.reentrant {
		for i := 0; i < p.extra; i++ {
			out, ci := w.acquireLock(cl, l, prim, res, owner, shape{op: OpLock}, p.deadlines[1+i])
			switch {
			case out == OutOK:
				count++
				h.regrant(ci)
				if prim == PrimFenced {
					w.rec.setToken(ci, l.Token())
				}
			case out != OutNo:
				dirty = true
			}
		}
	}
	if p.extend && s.lease > 0 && bad(w.extend(cl, l, prim, res, owner, p.extendLease, p.deadlines[5], h)) {
		dirty = true
	}
	if !toLeaseEnd(p, s, h) {
		critical(p, s)
	}
	rp := p
	if p.relock && s.lease > 0 {
		// A caller in a hurry, which re-locks when its Unlock failed: the
		// release it gave up on is still owed, and the re-lock comes once
		// the old fixed lease has run out (see relock).
		rp.noDeadline = false
		for i := 3; i < len(rp.deadlines); i++ {
			rp.deadlines[i] = p.quickUnlock
		}
	}
	if !w.release(cl, l, prim, []string{res}, []string{owner}, count, rp, h) && !dirty {
		return
	}
	if !p.relock || dirty {
		w.forget(prim, cl, name)
		return
	}
	w.relock(cl, l, prim, res, owner, name, p, h.leaseLate())
}

// The re-lock after a failed Unlock: its lease, and how far past the old
// hold's fixed lease it waits at most.
const (
	relockLease   = 10 * time.Second
	relockWaitMax = 5 * time.Second
)

// relock locks again with the same handle after its Unlock failed, while
// that release may still be owed to Redis, with a lease long enough that a
// release reaching Redis after this grant would free a hold that still has
// most of its lease to run. After a hold with a fixed lease it waits until
// that lease has surely run out in Redis (oldLease, a little after): sooner,
// Redis would count the grant as a reentry of the old hold, which the owed
// release then merely decrements. It keeps the new hold for a while, so
// that a stale release has time to reach Redis and another owner to take
// the name meanwhile.
func (w *worker) relock(cl *client, l *lockactor.Lock, prim Prim, res, owner, name string, p plan, oldLease time.Time) {
	if d := time.Until(oldLease.Add(20 * time.Millisecond)); !oldLease.IsZero() && d > 0 {
		time.Sleep(min(d, relockWaitMax))
	}
	s := shape{op: OpLock, lease: relockLease}
	out, ci := w.acquireLock(cl, l, prim, res, owner, s, p.deadlines[2])
	if out != OutOK {
		w.forget(prim, cl, name)
		return
	}
	h := w.grant(l, Hold{Prim: prim, Res: res, Owner: owner}, ci)
	time.Sleep(p.longCrit)
	if w.release(cl, l, prim, []string{res}, []string{owner}, 1, p, h) {
		w.forget(prim, cl, name)
	}
}

// grant opens the hold a successful acquire call ci gave handle l, with its
// fencing token read at once (it reads 0 once Lost has closed).
func (w *worker) grant(l *lockactor.Lock, h Hold, ci int) *openHold {
	if h.Prim == PrimFenced {
		h.Token = l.Token()
		w.rec.setToken(ci, h.Token)
	}
	if w.r.cfg.HoldField != nil {
		if f := w.r.cfg.HoldField(l); f != h.Owner {
			h.Relayed = f
		}
	}
	oh := w.rec.open(h, ci, l.Lost())
	w.probe(oh, h)
	w.r.topo.probeReplica(oh, h)
	return oh
}

// probe looks, on an unhooked connection, whether Redis has the hold the
// caller was just handed (see CheckGhostGrants).
func (w *worker) probe(oh *openHold, h Hold) {
	if h.Prim != PrimLock && h.Prim != PrimFenced && h.Prim != PrimFair && h.Prim != PrimMulti && h.Prim != PrimSpin {
		return
	}
	server, name, _ := strings.Cut(h.Res, "/")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	has, err := w.r.admin[server].HExists(ctx, name, h.Field()).Result()
	if err == nil {
		oh.probed(time.Now(), !has)
	}
}

// holdOnAfterFailure is how long an owner keeps its remaining holds after a
// failed Unlock of one of them: past the longest settlement block.
const holdOnAfterFailure = 10 * time.Second

// release ends holds (just before the last Unlock) and unlocks count times;
// it reports whether any Unlock failed.
func (w *worker) release(cl *client, l lockactor.Locker, prim Prim, res, owners []string, count int, p plan, holds ...*openHold) (failed bool) {
	last := -1
	for i := 0; i < count; i++ {
		if i == count-1 {
			for _, h := range holds {
				h.end(false)
			}
		}
		deadline := p.deadlines[3+i%3]
		if p.noDeadline {
			deadline = 0
		}
		out, ci := w.unlock(cl, l, prim, res, owners, deadline)
		failed = failed || out != OutOK
		last = ci
		if i < count-1 {
			for _, h := range holds {
				w.rec.link(ci, h.id)
			}
			if out != OutOK {
				// The runtime goes on releasing that one hold in the
				// background; the owner still has the others, and keeps
				// them until any settlement of the failed release is over:
				// a release applied twice would free the lock under it.
				time.Sleep(holdOnAfterFailure)
			}
		}
	}
	for _, h := range holds {
		h.released(last)
	}
	return failed
}

// rwStep takes a ReadWriteLock name as a reader, a writer, or a writer that
// also reads (write-then-read reentry), then releases in either order
// (write first is a downgrade). Read-then-write is never attempted: the
// library refuses it by design.
func (w *worker) rwStep(p plan) {
	name := fmt.Sprintf("rw%d", p.name)
	res := "A/" + name
	rw := w.rws[name]
	if rw == nil {
		rw = w.ca.c.ReadWriteLock(name)
		w.rws[name] = rw
	}
	owner := w.r.cfg.OwnerOf(rw.ReadLock())
	s := shapeOf(p, false)
	first, prim := rw.WriteLock(), PrimWrite
	if p.rwShape < 45 {
		first, prim = rw.ReadLock(), PrimRead
	}
	// An RW owner's handle is dropped after any result but a clean one: a
	// read hold left behind by a failed release would make this owner's next
	// write an upgrade.
	forget := func() { delete(w.rws, name) }
	out, ci := w.acquireLock(w.ca, first, prim, res, owner, s, p.deadlines[0])
	if out != OutOK {
		if out != OutNo {
			forget()
		}
		return
	}
	hw := w.grant(first, Hold{Prim: prim, Res: res, Owner: owner}, ci)
	if prim == PrimRead || p.rwShape < 80 {
		critical(p, s)
		if w.release(w.ca, first, prim, []string{res}, []string{owner}, 1, p, hw) {
			forget()
		}
		return
	}
	read := rw.ReadLock()
	out, ci = w.acquireLock(w.ca, read, PrimRead, res, owner, shape{op: OpLock}, p.deadlines[1])
	var hr *openHold
	dirty := false
	switch out {
	case OutOK:
		hr = w.grant(read, Hold{Prim: PrimRead, Res: res, Owner: owner}, ci)
	case OutNo:
	default:
		dirty = true
	}
	critical(p, s)
	views := []*lockactor.Lock{read, first}
	holds := []*openHold{hr, hw}
	prims := []Prim{PrimRead, PrimWrite}
	if p.downgrade {
		views[0], views[1], holds[0], holds[1], prims[0], prims[1] = first, read, hw, hr, PrimWrite, PrimRead
	}
	for i, h := range holds {
		if h != nil && w.release(w.ca, views[i], prims[i], []string{res}, []string{owner}, 1, p, h) {
			dirty = true
		}
	}
	if dirty {
		forget()
	}
}

// semStep takes 1-2 permits of a semaphore of the current generation and
// gives them back, unless Redis restarted meanwhile (the permits are gone
// with the old server; giving them back would mint new ones).
func (w *worker) semStep(p plan) {
	name := fmt.Sprintf("sem%d.g%d", p.name, w.r.gen.Load())
	res := "A/" + name
	sem := w.ca.c.Semaphore(name)
	n := p.permits
	c := Call{Client: w.ca.name, Prim: PrimSem, Res: []string{res}, N: n, Op: OpAcquire, Waiting: true}
	cancel := acquireShape(p, &c)
	e1 := w.r.epoch.Load()
	cc := newCallCtx(p.deadlines[0], cancel)
	out, ci := w.rec.do(c, cc, func(ctx context.Context) (bool, error) {
		if c.Op == OpAcquire {
			err := sem.Acquire(ctx, n)
			return err == nil, err
		}
		return sem.TryAcquire(ctx, n, c.Wait)
	})
	cc.done()
	if out != OutOK {
		return
	}
	h := w.rec.open(Hold{Prim: PrimSem, Res: res, N: n}, ci, nil)
	critical(p, shape{lease: 1}) // always short: permits have no watchdog
	if e := w.r.epoch.Load(); e != e1 || e1%2 == 1 {
		h.end(true)
		return
	}
	h.end(false)
	rc := newCallCtx(p.deadlines[3], 0)
	_, ri := w.rec.do(Call{Client: w.ca.name, Prim: PrimSem, Op: OpRelease, Res: []string{res}, N: n}, rc,
		func(ctx context.Context) (bool, error) { return true, sem.Release(ctx, n) })
	rc.done()
	h.released(ri)
}

// acquireShape gives a semaphore's acquire call c (an Acquire that waits)
// the form the plan picks, and returns when its caller gives up (0: not
// early): Acquire for a third, one TryAcquire attempt for a quarter,
// TryAcquire with a wait for a quarter, and an Acquire given up at a
// random point for the rest.
func acquireShape(p plan, c *Call) time.Duration {
	switch {
	case p.shape < 35:
		return 0
	case p.shape < 60:
		c.Op, c.Waiting = OpTryAcquire, false
		return 0
	case p.shape < 85:
		c.Op, c.Wait, c.Waiting = OpTryAcquire, p.wait, p.wait > 0
		return 0
	}
	return p.cancel
}

// multiStep takes a MultiLock of one name on server A (through this
// worker's Client of A) and one on server B (through its Client of B).
func (w *worker) multiStep(p plan) {
	k := fmt.Sprintf("%d|%d", p.name, p.nameB)
	m := w.multis[k]
	if m == nil {
		m = &multiHandle{la: w.ca.c.Lock(fmt.Sprintf("mla%d", p.name)), lb: w.cb.c.Lock(fmt.Sprintf("mlb%d", p.nameB))}
		m.ml = lockactor.NewMultiLock(m.la, m.lb)
		w.multis[k] = m
	}
	res := []string{fmt.Sprintf("A/mla%d", p.name), fmt.Sprintf("B/mlb%d", p.nameB)}
	owners := []string{w.r.cfg.OwnerOf(m.la), w.r.cfg.OwnerOf(m.lb)}
	s := shapeOf(p, false)
	c := Call{Client: w.ca.name, Prim: PrimMulti, Op: s.op, Res: res, Owners: owners, Wait: s.wait, Lease: s.lease,
		Waiting: (s.op == OpLock || s.wait > 0) && !tinyLease(s.lease)}
	before := m.ml.Lost() // taken while nothing is held: the next hold's
	cc := newCallCtx(p.deadlines[0], s.cancel)
	out, ci := w.rec.do(c, cc, func(ctx context.Context) (bool, error) { return lockCall(ctx, m.ml, s) })
	cc.done()
	if out != OutOK {
		if bad(out) {
			delete(w.multis, k)
		}
		return
	}
	if m.ml.Lost() != before {
		w.r.violate(VLostChan, fmt.Sprintf("%v: the MultiLock's Lost after its Lock (call %d) is not the channel taken before it", res, ci))
	}
	ha := w.grant(m.la, Hold{Prim: PrimMulti, Res: res[0], Owner: owners[0]}, ci)
	hb := w.grant(m.lb, Hold{Prim: PrimMulti, Res: res[1], Owner: owners[1]}, ci)
	critical(p, s)
	if w.release(w.ca, m.ml, PrimMulti, res, owners, 1, p, ha, hb) {
		delete(w.multis, k)
	}
}

// forceStep deletes a Lock, FairLock, FencedLock or SpinLock name whoever
// holds it.
// The forced-out holder may then see ErrNotHeld and Lost: legitimate, and
// the checker ends every hold of the name at that moment.
func (w *worker) forceStep(p plan) {
	prim := [...]Prim{PrimLock, PrimFair, PrimFenced, PrimSpin}[p.shape%4]
	name := fmt.Sprintf("%s%d", map[Prim]string{PrimLock: "lock", PrimFair: "fair", PrimFenced: "fenced", PrimSpin: "spin"}[prim], p.name)
	l := w.lockHandle(prim, w.ca, name)
	c := Call{Client: w.ca.name, Prim: prim, Op: OpForceUnlock, Res: []string{"A/" + name}, Owners: []string{w.r.cfg.OwnerOf(l)}}
	cc := newCallCtx(p.deadlines[0], 0)
	w.rec.do(c, cc, func(ctx context.Context) (bool, error) {
		_, err := l.ForceUnlock(ctx)
		return true, err
	})
	cc.done()
}

// mutexStep takes the Client's Mutex of a name, which every worker of the
// Client shares: each hold is a fresh owner, known (and recorded on the
// call) only once it is granted. It checks like a Lock's hold.
func (w *worker) mutexStep(p plan) {
	if w.r.cfg.MutexHolder == nil {
		w.lockStep(p, PrimLock, w.ca, fmt.Sprintf("lock%d", p.name))
		return
	}
	name := fmt.Sprintf("mutex%d", p.name)
	m := w.ca.mutex(name)
	res := w.ca.server + "/" + name
	s := shapeOf(p, false)
	pending := fmt.Sprintf("%s%d)", PendingOwner, w.r.ids.Add(1)) // no owner until granted
	c := Call{Client: w.ca.name, Prim: PrimLock, Op: s.op, Res: []string{res}, Owners: []string{pending}, Wait: s.wait, Lease: s.lease,
		Waiting: (s.op == OpLock || s.wait > 0) && !tinyLease(s.lease)}
	cc := newCallCtx(p.deadlines[0], s.cancel)
	out, ci := w.rec.do(c, cc, func(ctx context.Context) (bool, error) { return lockCall(ctx, m, s) })
	cc.done()
	if out != OutOK {
		return
	}
	holder := w.r.cfg.MutexHolder(m)
	owner := w.r.cfg.OwnerOf(holder)
	w.rec.setOwners(ci, owner)
	h := w.grant(holder, Hold{Prim: PrimLock, Res: res, Owner: owner}, ci)
	if !toLeaseEnd(p, s, h) {
		critical(p, s)
	}
	w.release(w.ca, m, PrimLock, []string{res}, []string{owner}, 1, p, h)
}
