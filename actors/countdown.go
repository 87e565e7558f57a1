package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// countDownActor serves one CountDownLatch name for one Client: its local
// Await callers, the subscription to the latch's channel while any wait,
// and its TrySetCount and CountDown requests, run latched one at a time in
// the order they came.
//
// Await callers are released when a check (a GET of the count, sent after
// they arrived) finds no count, when a CountDown of this actor sent after
// they arrived leaves none, or when the zero message arrives. Checks run
// when callers arrive, on every (re)subscription or disconnection (so a
// zero message published before the subscription existed is not lost),
// after a new-count message, and every SemaphoreRecheck while callers wait.
type countDownActor struct {
	base
	ledger  ledger
	waiters []cdWaiter
	adjusts []*messages.Adjust // TrySetCount (SetOnly) and CountDown (N -1)

	arrivals  uint64    // numbers the waiters, from 1
	checked   uint64    // the last waiter a check sent so far covers
	needCheck bool      // news calls for a check of every waiter
	checking  bool      // a check is in flight
	nextCheck time.Time // the periodic re-check while callers wait

	sig   signal
	subID uint64
}

// cdWaiter is one Await caller and its arrival number.
type cdWaiter struct {
	m   *messages.Acquire
	gen uint64
}

// counted is a check's reply: the count (0 when unset) read after every
// waiter up to upto had arrived.
type counted struct {
	n    int64
	err  error
	upto uint64
}

func newCountDownActor(rt *Runtime, key Key, e *entry) *countDownActor {
	a := &countDownActor{base: base{rt: rt, key: key, entry: e}}
	a.ledger = newLedger(&a.base)
	a.ledger.stalled = func(err error) { refuseAdjusts(&a.adjusts, err) }
	return a
}

// Receive applies one message to the state, then reconciles.
func (a *countDownActor) Receive(ctx actor.Context) {
	defer a.recoverPanic(ctx)
	if a.lifecycle(ctx, a) {
		return
	}
	switch m := ctx.Message().(type) {
	case *messages.Acquire:
		if !m.Req.Pending() {
			return
		}
		a.arrivals++
		a.waiters = append(a.waiters, cdWaiter{m: m, gen: a.arrivals})
	case *messages.Adjust:
		a.adjusts = append(a.adjusts, m)
	case *messages.Abandon:
		a.release(func(w cdWaiter) bool { return w.m.Req == m.Req }, messages.Result{})
	case *messages.Wake:
		a.onWake(a.sig.take())
	case *counted:
		a.onCounted(m)
	case *messages.Tick:
		a.tickArrived()
		if !a.nextCheck.IsZero() && !time.Now().Before(a.nextCheck) {
			a.needCheck = true
		}
	case *messages.Continue:
	case *replied:
		a.ledger.onReply(m)
	case *resolved:
		a.ledger.onResolved(m)
	default:
		return
	}
	a.reconcile()
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

// onWake applies pub/sub news. The zero message releases every waiter (the
// count reached 0 while they waited); anything else, a new count or a
// (re)subscription, calls for a check.
func (a *countDownActor) onWake(n news) {
	if n.msgs > 0 && !n.resync && n.payload == redisio.CountDownZero {
		a.open(a.arrivals)
		return
	}
	a.needCheck = true
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

func (a *countDownActor) reconcile() {
	a.steps(a.step)
	a.settle()
}

// step sends what is due, in order: the settlement of a lost reply, the
// next TrySetCount or CountDown, then a check for the waiters. It returns
// false when nothing is due.
func (a *countDownActor) step(time.Time) bool {
	if taken, ran := a.ledger.turn(time.Now()); taken {
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
	a.nextCheck = time.Now().Add(a.rt.cfg.SemaphoreRecheck)
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
	}
	if a.quiet() {
		a.ledger.forget()
	}
}

func (a *countDownActor) shutdown() {
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
