package actors

import (
	"context"
	"strconv"
	"time"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// semaphoreActor serves one semaphore name for one Client: a FIFO of local
// acquirers (a large request at the head is not overtaken), woken by the
// count published on redisson_sc:{name} and by a periodic re-check, since a
// semaphore has no TTL to bound a lost message.
//
// Its states are idle, waiting, settling (permits still owed back to Redis,
// or a request whose reply was lost) and retiring. Handlers apply their
// event; reconcile runs one script at a time — a settlement, permits owed
// back, permit adjustments, direct attempts, then an attempt for the head —
// and is the only code that grants or drops waiters. Its invariant: while a
// waiter is queued, a request is in flight or settling, or the work timer is
// armed within the re-check period; permits given back (a Release, or a
// grant whose caller had gone) are retried until Redis confirms them.
type semaphoreActor struct {
	scripted
	waiters waitQueue
	direct  []*messages.Acquire // TryAcquire: one attempt, never queued
	owed    owedQueue           // permits given back
	adjusts []*messages.Adjust  // AddPermits, TrySetPermits
	verdict semVerdict
	phase   phase
	// news counts Wakes: a refusal sent before the last one may predate
	// the permits it announced, and sets no verdict.
	news uint64
	// late spaces the head's attempts after permits that came back past
	// their lease.
	late lateGate

	sig   signal
	subID uint64

	// attempt and giveBack build the acquire and the owed release this
	// actor sends: semAttempt and semGiveBack, or, for a permit semaphore
	// (KindPermit; permit.go), permAttempt and permGiveBack, which take
	// and give back one permit named by the request's Owner. add runs an
	// AddPermits: the store's SemaphoreAdd, or its PermitAdd, which
	// publishes as Redisson's permit semaphore does.
	attempt  func(m *messages.Acquire, queued bool) request
	giveBack func(o *owed) request
	add      func(ctx context.Context, op redisio.Op, name string, n int) redisio.Reply
}

// semVerdict: until when a request for at least permits is known to fail.
type semVerdict struct {
	until   time.Time
	permits int
}

func (v semVerdict) refuses(m *messages.Acquire, now time.Time) bool {
	return !v.until.IsZero() && now.Before(v.until) && m.Permits >= v.permits
}

func newSemaphoreActor(rt *Runtime, key Key, e *entry) *semaphoreActor {
	a := &semaphoreActor{}
	a.init(rt, key, e)
	a.attempt = func(m *messages.Acquire, queued bool) request {
		return &semAttempt{a: a, m: m, queued: queued, news: a.news}
	}
	a.giveBack = func(o *owed) request { return &semGiveBack{a: a, o: o} }
	a.add = rt.io.SemaphoreAdd
	a.ledger.stalled = func(err error) {
		tellStalled(&a.direct, &a.owed, err)
		refuseAdjusts(&a.adjusts, err)
	}
	return a
}

func (a *semaphoreActor) receive(msg any) { a.run(msg, a) }

// handle applies the actor's own messages (see lockMachine).
func (a *semaphoreActor) handle(msg any) bool {
	switch m := msg.(type) {
	case *messages.Acquire:
		if !m.Req.Pending() {
			return false
		}
		if m.TryOnly {
			a.direct = append(a.direct, m)
		} else {
			a.waiters.push(m)
		}
	case *messages.Release:
		a.owed.push(&owed{n: m.Permits, m: m, k: holdKey{owner: m.Owner}, due: a.now})
	case *messages.Adjust:
		a.adjusts = append(a.adjusts, m)
	case *messages.Abandon:
		a.waiters.remove(m.Req)
	case *messages.Wake:
		a.onWake(a.sig.take())
	default:
		return false
	}
	return true
}

// onWake applies pub/sub news. A message carries the count available now:
// requests for more than that stay refused.
func (a *semaphoreActor) onWake(n news) {
	a.news++
	count, err := strconv.Atoi(n.payload)
	if n.resync || err != nil {
		a.verdict = semVerdict{}
		return
	}
	if n.msgs > 0 {
		a.verdict = semVerdict{until: a.now.Add(a.rt.cfg.SemaphoreRecheck), permits: max(count+1, 1)}
	}
}

// step runs the next script due, in order: the settlement of a lost reply,
// permits owed back, adjustments, direct attempts, then an attempt for the
// head. It returns false when nothing is due.
func (a *semaphoreActor) step(now time.Time) bool {
	if taken, ran := a.ledger.turn(now); taken {
		return ran
	}
	switch {
	case a.runOwed(now):
	case len(a.adjusts) > 0:
		m := a.adjusts[0]
		a.adjusts = a.adjusts[1:]
		a.adjust(m)
	case len(a.direct) > 0:
		if m := popPending(&a.direct); m != nil {
			a.try(m, false)
		}
	default:
		head := a.waiters.front()
		if head == nil || a.verdict.refuses(head, now) || a.late.shut(now) {
			return false
		}
		a.try(head, true)
	}
	return true
}

// settle subscribes while anyone waits and arms the work timer: for the
// settlement, owed permits, and the re-check of a refused head.
func (a *semaphoreActor) settle() {
	var next soonest
	next.add(a.ledger.due())
	next.add(a.owed.due())
	if !a.waiters.empty() && a.ledger.settled() {
		// (Subscribing only once nothing is in flight: see lockActor.settle.)
		if a.subID == 0 {
			a.subID = a.subscribe(redisio.SemaphoreChannel(a.key.Name), &a.sig, lockWake)
		}
		next.add(a.verdict.until)
		switch now := a.now; {
		case a.late.shut(now):
			next.add(a.late.until)
		case a.verdict.until.IsZero():
			next.add(now)
		}
	}
	a.wakeAt(next.at)
	a.phase = a.currentPhase()
	a.entry.waiters.Store(int64(a.waiters.len())) // for Runtime.Census
}

func (a *semaphoreActor) currentPhase() phase {
	switch {
	case a.retiring:
		return retiring
	case !a.waiters.empty() || len(a.direct) > 0 || len(a.adjusts) > 0:
		return waiting
	case a.owed.len() > 0 || !a.ledger.settled():
		return settling
	}
	return idle
}

func (a *semaphoreActor) quiet() bool { return a.currentPhase() == idle }

func (a *semaphoreActor) tidy() {
	if a.waiters.empty() {
		a.unsubscribe(redisio.SemaphoreChannel(a.key.Name), a.subID)
		a.subID = 0
		a.verdict = semVerdict{}
		a.waiters = waitQueue{}
	}
	if a.quiet() {
		a.ledger.forget()
	}
}

func (a *semaphoreActor) shutdown() {
	a.ledger.close()
	a.unsubscribe(redisio.SemaphoreChannel(a.key.Name), a.subID)
	a.subID = 0
}
