package actors

import (
	"time"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// countDownActor serves one CountDownLatch name for one Client: its local
// Await callers, the subscription to the latch's channel while any wait,
// and its TrySetCount and CountDown requests, run latched one at a time in
// the order they came.
//
// An Await caller is released only by news of a zero count from after it
// arrived: a check (a GET of the count, sent after it arrived) that finds
// no count, a CountDown of this actor sent after it arrived that leaves
// none, or a zero message published after it arrived. The last is known by
// a barrier (a PING on the subscription's connection, sent once the caller
// is queued): a message heard after the barrier passed was published after
// it; one heard before may be an old round's, still on its way while the
// count was set again, and only calls for a check. Checks run when callers
// arrive, on every (re)subscription or disconnection (so a zero message
// published before the subscription existed is not lost), after any
// message that cannot release everyone, and every SemaphoreRecheck while
// callers wait. A round that reached zero and was set again within a round
// trip of a caller's arrival may so pass it by: it waits for the next.
type countDownActor struct {
	scripted
	waiters []cdWaiter
	adjusts []*messages.Adjust // TrySetCount (SetOnly) and CountDown (N -1)

	arrivals  uint64    // numbers the waiters, from 1
	checked   uint64    // the last waiter a check sent so far covers
	needCheck bool      // news calls for a check of every waiter
	checking  bool      // a check is in flight
	nextCheck time.Time // the periodic re-check while callers wait

	// The zero messages' barriers: one out at a time, for every waiter
	// queued when it was sent; a waiter that arrives meanwhile waits for
	// the next. lastZero is the number of the latest zero message heard
	// (see signal.marked).
	barrierOut bool
	lastZero   int64

	sig   signal
	subID uint64
}

// cdWaiter is one Await caller, its arrival number, and the number of the
// last message heard before its barrier passed (a zero message numbered
// above it releases the caller); -1 until its barrier has passed.
type cdWaiter struct {
	m     *messages.Acquire
	gen   uint64
	after int64
}

// passed is a barrier's passing: every waiter up to upto is past it, and
// seq the number of the last message heard before it.
type passed struct {
	upto uint64
	seq  int64
}

// counted is a check's reply: the count (0 when unset) read after every
// waiter up to upto had arrived.
type counted struct {
	n    int64
	err  error
	upto uint64
}

func newCountDownActor(rt *Runtime, key Key, e *entry) *countDownActor {
	a := &countDownActor{}
	a.init(rt, key, e)
	a.sig.marker = redisio.CountDownZero
	a.ledger.stalled = func(err error) { refuseAdjusts(&a.adjusts, err) }
	return a
}

func (a *countDownActor) receive(msg any) { a.run(msg, a) }

// handle applies the actor's own messages (see lockMachine).
func (a *countDownActor) handle(msg any) bool {
	switch m := msg.(type) {
	case *messages.Acquire:
		if !m.Req.Pending() {
			return false
		}
		a.arrivals++
		a.waiters = append(a.waiters, cdWaiter{m: m, gen: a.arrivals, after: -1})
	case *messages.Adjust:
		a.adjusts = append(a.adjusts, m)
	case *messages.Abandon:
		a.release(func(w cdWaiter) bool { return w.m.Req == m.Req }, messages.Result{})
	case *messages.Wake:
		a.onWake(a.sig.take())
	case *counted:
		a.onCounted(m)
	case *passed:
		a.onPassed(m)
	case *messages.Tick:
		a.tickArrived()
		if !a.nextCheck.IsZero() && !a.now.Before(a.nextCheck) {
			a.needCheck = true
		}
	default:
		return false
	}
	return true
}

// release answers res to the waiters for which pick is true and drops them,
// with the waiters already answered or withdrawn.
func (a *countDownActor) release(pick func(cdWaiter) bool, res messages.Result) {
	kept := a.waiters[:0]
	for _, w := range a.waiters {
		switch {
		case !w.m.Req.Pending():
		case pick(w):
			w.m.Req.Answer(res)
		default:
			kept = append(kept, w)
		}
	}
	clear(a.waiters[len(kept):])
	a.waiters = kept
}

// open releases every waiter that arrived up to upto: the count was 0
// after they did.
func (a *countDownActor) open(upto uint64) {
	a.release(func(w cdWaiter) bool { return w.gen <= upto }, messages.Result{Granted: true})
}

// onWake applies pub/sub news. A zero message releases the waiters whose
// barrier passed before it (the count reached 0 after they arrived); the
// others, and anything else (a new count, a (re)subscription), call for a
// check. After a (re)subscription or a disconnection a barrier out may
// never pass: the waiters it covered get another.
func (a *countDownActor) onWake(n news) {
	a.lastZero = max(a.lastZero, n.marked)
	a.openPast()
	if n.resync {
		a.barrierOut = false
	}
	if n.resync || n.payload != redisio.CountDownZero || a.unbarred() {
		a.needCheck = true
	}
}

// onPassed applies a barrier's passing: the waiters it covers are released
// by any zero message heard after it.
func (a *countDownActor) onPassed(m *passed) {
	a.barrierOut = false
	for i := range a.waiters {
		if w := &a.waiters[i]; w.gen <= m.upto && w.after < 0 {
			w.after = m.seq
		}
	}
	a.openPast()
}

// openPast releases the waiters that a zero message heard after their
// barrier passed finds waiting.
func (a *countDownActor) openPast() {
	a.release(func(w cdWaiter) bool { return w.after >= 0 && a.lastZero > w.after }, messages.Result{Granted: true})
}

// unbarred reports whether a waiter's barrier has not passed yet.
func (a *countDownActor) unbarred() bool {
	for _, w := range a.waiters {
		if w.after < 0 && w.m.Req.Pending() {
			return true
		}
	}
	return false
}

// barrier sends a barrier for every waiter queued now, unless one is out.
// While the channel is not subscribed yet nothing is sent: its Subscribed
// event brings the actor back.
func (a *countDownActor) barrier() {
	if a.barrierOut || a.subID == 0 || !a.unbarred() {
		return
	}
	upto, b, sig := a.arrivals, &a.base, &a.sig
	err := a.rt.ps.Barrier(a.rt.ctx, redisio.CountDownChannel(a.key.Name), func() {
		b.post(&passed{upto: upto, seq: sig.seq.Load()})
	})
	if err == nil {
		a.barrierOut = true
	}
}

// onCounted applies a check's reply.
func (a *countDownActor) onCounted(m *counted) {
	a.checking = false
	switch {
	case m.err != nil:
		a.redisError(OpAcquire, m.err)
		a.release(func(w cdWaiter) bool { return w.gen <= m.upto }, messages.Result{Err: m.err})
	case m.n <= 0:
		a.open(m.upto)
	}
}

// step sends what is due, in order: the settlement of a lost reply, the
// next TrySetCount or CountDown, then a check for the waiters. It returns
// false when nothing is due.
func (a *countDownActor) step(now time.Time) bool {
	if taken, ran := a.ledger.turn(now); taken {
		return ran
	}
	if len(a.adjusts) > 0 {
		m := a.adjusts[0]
		a.adjusts = a.adjusts[1:]
		a.ledger.send(&cdAdjust{a: a, m: m, upto: a.arrivals})
		return true
	}
	if a.checking || len(a.waiters) == 0 || (!a.needCheck && a.checked >= a.arrivals) {
		return false
	}
	a.check()
	return true
}

// check reads the count for every waiter queued now.
func (a *countDownActor) check() {
	a.checking, a.needCheck = true, false
	upto := a.arrivals
	a.checked = upto
	a.nextCheck = a.now.Add(a.rt.cfg.SemaphoreRecheck)
	b := &a.base
	a.rt.io.CountDownGetThen(a.rt.ctx, a.key.Name, func(n int64, err error) {
		b.post(&counted{n: n, err: err, upto: upto})
	})
}

// settle subscribes while anyone waits and arms the work timer: for the
// settlement of a lost reply and the periodic re-check.
func (a *countDownActor) settle() {
	var next soonest
	next.add(a.ledger.due())
	if len(a.waiters) > 0 {
		if a.subID == 0 {
			a.subID = a.subscribe(redisio.CountDownChannel(a.key.Name), &a.sig, lockWake)
		}
		a.barrier()
		next.add(a.nextCheck)
	} else {
		a.nextCheck = time.Time{}
	}
	a.wakeAt(next.at)
	a.entry.waiters.Store(int64(len(a.waiters))) // for Runtime.Census
}

func (a *countDownActor) quiet() bool {
	return !a.retiring && len(a.waiters) == 0 && len(a.adjusts) == 0 && !a.checking && a.ledger.settled()
}

func (a *countDownActor) tidy() {
	if len(a.waiters) == 0 {
		a.unsubscribe(redisio.CountDownChannel(a.key.Name), a.subID)
		a.subID = 0
		a.waiters = nil
		a.barrierOut = false // a barrier still out passes unheeded
	}
	if a.quiet() {
		a.ledger.forget()
	}
}

func (a *countDownActor) shutdown() {
	a.ledger.close()
	a.unsubscribe(redisio.CountDownChannel(a.key.Name), a.subID)
	a.subID = 0
}

// cdAdjust is one TrySetCount (countdown_set.lua) or CountDown
// (countdown_down.lua). upto is the last waiter queued when it was sent: a
// CountDown that leaves no count releases them.
type cdAdjust struct {
	a    *countDownActor
	m    *messages.Adjust
	upto uint64
}

func (r *cdAdjust) keep() time.Duration { return r.a.ledger.keepFor(0) }

func (r *cdAdjust) run(op redisio.Op) redisio.Reply {
	if r.m.SetOnly {
		return r.a.rt.io.CountDownSet(r.a.rt.ctx, op, r.a.key.Name, int64(r.m.N))
	}
	return r.a.rt.io.CountDown(r.a.rt.ctx, op, r.a.key.Name)
}

func (r *cdAdjust) apply(rep redisio.Reply) {
	n, err := rep.Int()
	r.a.redisError(OpAdjust, err)
	answerAdjust(r.m, messages.AdjustResult{Set: r.m.SetOnly && n == 1, Err: err})
	if err == nil && !r.m.SetOnly && n <= 0 {
		r.a.open(r.upto)
	}
}

func (r *cdAdjust) notRun(error) { answerAdjust(r.m, messages.AdjustResult{Err: errNotApplied}) }

// unknown: the caller has been told of the error that lost the reply (fail).
func (r *cdAdjust) unknown() {}

func (r *cdAdjust) fail(err error) {
	r.a.redisError(OpAdjust, err)
	answerAdjust(r.m, messages.AdjustResult{Err: err})
}
