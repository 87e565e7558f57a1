package actors

import (
	"slices"
	"time"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// fairActor serves one fair lock name for one Client. Order is kept in Redis
// (a queue of owners across all clients), so unlike lockActor every local
// waiter joins that queue with its own script, listens on its own channel and
// has its own retry time; a release wakes only the queue's head.
//
// Its states are lockActor's (idle, held, waiting, settling, retiring), and
// so is its shape: handlers apply their event; reconcile runs one script at a
// time, in order — a settlement, owed releases, cancels, direct attempts,
// then the waiters whose turn may have come — and is the only code that
// grants or drops waiters. Its invariant: every queued owner has a retry time
// no later than the script's estimate of its turn (or an attempt in flight),
// and every owner this actor stops waiting for without a grant is taken out
// of the Redis queue with fair_cancel, retried until Redis confirms, so no
// ghost stalls the queue of every client until its deadline.
type fairActor struct {
	scripted
	holdBook
	waiting map[string]*fairWaiter // by owner
	// arrived holds the same waiters in the order they arrived: the order
	// in which they first join the Redis queue, whatever is in flight when
	// they arrive (never a map's order).
	arrived []*fairWaiter
	direct  []*messages.Acquire // TryLock and owners that already hold
	owed    owedQueue
	cancels []*fairCancel
	// cancelling counts cancels in flight: their replies come back as
	// cancelled messages.
	cancelling int
	phase      phase
}

// fairWaiter is one owner queued in Redis, with the local calls that wait on
// it (several when goroutines share a handle).
type fairWaiter struct {
	owner   string
	reqs    []*messages.Acquire
	w       time.Duration // how long Redis keeps it queued without a retry
	sig     signal
	wake    *messages.Wake
	subID   uint64
	due     time.Time // next attempt; zero: now
	backoff backoff   // grows while the script keeps answering "now"
	// late spaces its attempts after grants that came back past their
	// lease.
	late lateGate
	news uint64 // Wakes so far: an estimate sent before the last one is stale
}

// fairCancel is a fair_cancel owed to Redis for an owner no longer waited for.
type fairCancel struct {
	owner   string
	w       time.Duration
	due     time.Time
	backoff backoff
}

// Retry spacing while the script estimates no wait but the turn has not come
// (a message is due); it never busy-polls.
const (
	fairMinBackoff = 20 * time.Millisecond
	fairMaxBackoff = time.Second
)

func newFairActor(rt *Runtime, key Key, e *entry) *fairActor {
	a := &fairActor{waiting: make(map[string]*fairWaiter)}
	a.init(rt, key, e)
	a.holdBook = newHoldBook(&a.base, rt.cfg.Watchdog)
	a.ledger.stalled = func(err error) { tellStalled(&a.direct, &a.owed, err) }
	return a
}

func (a *fairActor) receive(msg any) { a.run(msg, a) }

// handle applies the actor's own messages (see lockMachine).
func (a *fairActor) handle(msg any) bool {
	switch m := msg.(type) {
	case *messages.Acquire:
		a.onAcquire(m)
	case *messages.Release:
		a.owe(&a.owed, holdKey{m.Owner, messages.Exclusive}, m)
	case *messages.Abandon:
		if w := a.waiting[m.Owner]; w != nil && !pendingAny(w.reqs) {
			a.forget(w)
		}
	case *messages.Wake:
		if w := a.waiting[m.Owner]; w != nil {
			w.sig.take()
			w.due = time.Time{} // news on its own channel: its turn may have come
			w.news++
		}
	case *cancelled:
		a.cancelled(m)
	case *messages.RenewTick:
		a.renewAll(a.renewOne)
	case *renewed:
		a.renewed(m)
	case *messages.Extend:
		a.extend(m, a.renewOne)
	case *extended:
		a.extended(m)
	case *messages.Lose:
		a.lose(m)
	case *switched:
		a.switched(m)
	case *holdsRead:
		a.reread(m)
		a.ghostsIn(m)
	case *queueRead:
		a.queueRead(m)
	default:
		return false
	}
	return true
}

func (a *fairActor) onAcquire(m *messages.Acquire) {
	if !m.Req.Pending() {
		return
	}
	if _, holds := a.holds[holdKey{m.Owner, messages.Exclusive}]; m.TryOnly || holds {
		a.direct = append(a.direct, m)
		return
	}
	a.queue(m)
}

// queue adds m to its owner's waiter, creating it: same handle from two
// goroutines, one queue entry.
func (a *fairActor) queue(m *messages.Acquire) {
	if w := a.waiting[m.Owner]; w != nil {
		w.reqs = append(w.reqs, m)
		return
	}
	w := &fairWaiter{owner: m.Owner, reqs: []*messages.Acquire{m}, w: a.rt.cfg.FairWait, wake: &messages.Wake{Owner: m.Owner}}
	if m.Wait > 0 {
		w.w = m.Wait
	}
	a.waiting[m.Owner] = w
	a.arrived = append(a.arrived, w)
	// A new waiter of this owner takes over its place in Redis: a cancel
	// still owed for an earlier one must not take it out.
	for i, c := range a.cancels {
		if c.owner == m.Owner {
			a.cancels = append(a.cancels[:i], a.cancels[i+1:]...)
			break
		}
	}
}

func pendingAny(reqs []*messages.Acquire) bool {
	for _, m := range reqs {
		if m.Req.Pending() {
			return true
		}
	}
	return false
}

// forget stops waiting for w's owner and owes Redis its fair_cancel.
func (a *fairActor) forget(w *fairWaiter) {
	if a.waiting[w.owner] != w {
		return
	}
	a.drop(w)
	a.cancels = append(a.cancels, &fairCancel{owner: w.owner, w: w.w, due: a.now})
}

// drop stops listening for w and takes it out of the waiters.
func (a *fairActor) drop(w *fairWaiter) {
	a.unsubscribe(redisio.FairChannel(a.key.Name, w.owner), w.subID)
	delete(a.waiting, w.owner)
	if i := slices.Index(a.arrived, w); i >= 0 {
		a.arrived = slices.Delete(a.arrived, i, i+1)
	}
}

// step runs the next script due, in order: the settlement of a lost reply,
// owed releases, owed cancels, direct attempts, then an attempt for a waiter
// whose retry time has come. It returns false when nothing is due.
func (a *fairActor) step(now time.Time) bool {
	if taken, ran := a.ledger.turn(now); taken {
		return ran
	}
	a.promoteGhosts(&a.owed)
	switch {
	case a.runOwed(now):
	case a.runCancel(now):
	case a.runDirect():
	default:
		w := a.dueWaiter(now)
		if w == nil {
			return false
		}
		a.try(w.reqs[0], w)
	}
	return true
}

func (a *fairActor) runDirect() bool {
	m := popFree(&a.direct, a.owed.owes)
	if m != nil {
		a.try(m, nil)
	}
	return m != nil
}

// dueWaiter is the first waiter, in the order they arrived, whose retry
// time has come, with its withdrawn calls dropped; one with none left is
// forgotten on the way.
func (a *fairActor) dueWaiter(now time.Time) *fairWaiter {
	for i := 0; i < len(a.arrived); i++ {
		w := a.arrived[i]
		if now.Before(w.due) || a.owed.owes(w.owner) {
			continue // not yet; or its owner owes a release (see owed)
		}
		for len(w.reqs) > 0 && !w.reqs[0].Req.Pending() {
			w.reqs = w.reqs[1:]
		}
		if len(w.reqs) == 0 {
			if a.forget(w); i < len(a.arrived) && a.arrived[i] != w {
				i-- // forget took it out of arrived: the next is at i now
			}
			continue
		}
		return w
	}
	return nil
}

// settle subscribes every waiter to its channel and arms the work timer for
// the earliest retry, cancel, owed release or settlement.
func (a *fairActor) settle() {
	var next soonest
	next.add(a.ledger.due())
	next.add(a.owed.due())
	for _, c := range a.cancels {
		next.add(c.due)
	}
	for _, w := range a.arrived {
		if !a.ledger.settled() {
			break // (subscribing once nothing is in flight: see lockActor.settle)
		}
		if w.subID == 0 {
			w.subID = a.subscribe(redisio.FairChannel(a.key.Name, w.owner), &w.sig, w.wake)
		}
		if a.owed.owes(w.owner) {
			continue // it waits for its release, whose retry is armed
		}
		next.add(w.due)
		if w.due.IsZero() {
			next.add(a.now)
		}
	}
	a.wakeAt(next.at)
	if len(a.waiting) > 0 || len(a.cancels) > 0 {
		a.rt.sawFair(a.key.Name) // a switch soon after checks the queue
	}
	a.phase = a.currentPhase()
	a.entry.waiters.Store(int64(len(a.waiting))) // for Runtime.Census
}

func (a *fairActor) currentPhase() phase {
	switch {
	case a.retiring:
		return retiring
	case len(a.waiting) > 0 || len(a.direct) > 0:
		return waiting
	case len(a.holds) > 0:
		return held
	case a.owed.len() > 0 || len(a.cancels) > 0 || a.cancelling > 0 || !a.ledger.settled():
		return settling
	}
	return idle
}

func (a *fairActor) quiet() bool { return a.currentPhase() == idle }

func (a *fairActor) tidy() {
	a.holdBook.tidy()
	if a.quiet() {
		a.ledger.forget()
	}
}

// shutdown stops timers and takes every owner still waiting here out of the
// Redis queue, best effort within Close's grace: a Client that closes leaves
// no ghost behind for other clients to wait out.
func (a *fairActor) shutdown() {
	a.ledger.close()
	a.holdBook.stop()
	for _, w := range slices.Clone(a.arrived) {
		a.forget(w)
	}
	ctx := a.rt.shutdownCtx()
	for _, c := range a.cancels {
		if ctx.Err() != nil {
			break
		}
		if _, err := a.rt.io.FairCancel(ctx, a.key.Name, c.owner, c.w, a.now); err != nil {
			a.rt.cfg.Logger.Debug("lockactor: fair cancel at close failed; the deadline will purge it", "lock", a.key.Name, "err", err)
		}
	}
	a.cancels = nil
}
