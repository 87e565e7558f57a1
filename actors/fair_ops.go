package actors

import (
	"time"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// The scripts a fairActor runs and what their replies do to its state.

// try sends fair_lock.lua for m, on behalf of queued waiter w (nil for a
// direct attempt).
func (a *fairActor) try(m *messages.Acquire, w *fairWaiter) {
	r := &fairAttempt{a: a, m: m, w: w, sent: a.now, lease: a.leaseOf(m.Lease), qw: a.rt.cfg.FairWait}
	if w != nil {
		r.qw, r.news = w.w, w.news
	}
	a.ledger.send(r)
}

// fairAttempt is one fair_lock.lua, for a queued owner or a direct request.
type fairAttempt struct {
	a     *fairActor
	m     *messages.Acquire
	w     *fairWaiter // nil for a direct attempt
	sent  time.Time
	lease time.Duration
	qw    time.Duration // how long Redis keeps the owner queued without a retry
	news  uint64        // w's Wakes when it was sent
}

func (r *fairAttempt) keep() time.Duration { return r.a.ledger.keepFor(max(r.lease, r.qw)) }

func (r *fairAttempt) run(op redisio.Op) redisio.Reply {
	return r.a.rt.io.FairLock(r.a.rt.ctx, op, r.a.key.Name, r.m.Owner, r.lease, r.qw, r.sent, r.m.TryOnly)
}

func (r *fairAttempt) apply(rep redisio.Reply) { r.a.attempted(r, rep) }
func (r *fairAttempt) fail(err error)          { r.a.attemptFailed(r.m, r.w, err) }

// notRun: a queued owner retries at its time; a direct request goes again
// first.
func (r *fairAttempt) notRun(error) {
	if r.w == nil && r.m.Req.Pending() {
		r.a.direct = append([]*messages.Acquire{r.m}, r.a.direct...)
	}
}

// unknown: a grant it may have made has expired, but it may have left its
// owner in Redis's queue: an owner nobody waits for any more is cancelled.
func (r *fairAttempt) unknown() {
	r.notRun(nil)
	if _, waits := r.a.waiting[r.m.Owner]; !waits && !r.m.Req.Pending() {
		r.a.cancels = append(r.a.cancels, &fairCancel{owner: r.m.Owner, w: r.qw, due: r.a.now})
	}
}

// attempted applies fair_lock.lua's reply.
func (a *fairActor) attempted(at *fairAttempt, r redisio.Reply) {
	m, w, sent := at.m, at.w, at.sent
	ok, wait, err := r.Acquire()
	switch {
	case err != nil:
		a.attemptFailed(m, w, err)
	case ok && (r.Unsynced || stale(a.now, sent, at.lease)):
		// Not on enough replicas, or too late to trust (see
		// lockActor.attempted): give it back; the owner is out of the
		// Redis queue now, so it queues again.
		k := holdKey{m.Owner, messages.Exclusive}
		a.granted(k, sent, m.Lease, 0, nil)
		a.owe(&a.owed, k, nil)
		if m.TryOnly && r.Unsynced {
			m.Req.Answer(messages.Result{Err: r.NotReplicated()})
		} else if m.TryOnly {
			m.Req.Answer(messages.Result{})
		} else if w == nil {
			a.queue(m)
		} else if a.waiting[w.owner] == w && r.Unsynced {
			w.due = time.Time{}
		} else if a.waiting[w.owner] == w {
			w.due = w.late.tooLate(a.now)
		}
	case ok:
		a.grant(m, sent)
		if w != nil && a.waiting[w.owner] == w {
			// The script took the owner out of the queue. Calls sharing
			// the handle now hold reentrantly.
			a.earlierTryNow(w)
			a.drop(w)
			for _, r := range w.reqs {
				if r != m && r.Req.Pending() {
					a.direct = append(a.direct, r)
				}
			}
		}
	case m.TryOnly:
		m.Req.Answer(messages.Result{TTL: wait})
	case w == nil:
		a.queue(m) // an owner whose hold is gone waits like everyone else
	case a.waiting[w.owner] == w && w.news == at.news:
		w.retryIn(a.now, wait)
	case a.waiting[w.owner] == w:
		// A Wake came while the attempt was in flight: the estimate may
		// predate the release it announced, so the owner tries again now.
	default:
		// w was forgotten while its reply was unsettled; its cancel is owed.
	}
}

// earlierTryNow: w was granted from the head of the Redis queue, so every
// waiter of this Client that joined it before w and still waits is no
// longer in it: purged as dead once the grants ahead of it had used up
// its deadline (each grant moves every deadline W sooner), a fate nobody
// announces. Each tries again at once, and joins anew, rather than sleep
// until an estimate made when it joined (a torture run saw one sleep 2.5 s
// on a free lock).
func (a *fairActor) earlierTryNow(w *fairWaiter) {
	for _, e := range a.arrived {
		if e == w {
			return
		}
		e.due = time.Time{}
	}
}

// retryIn schedules the owner's next attempt at the script's estimate, so a
// lost message or a crashed waiter ahead never strands it. An estimate of
// (about) zero means the turn is due any moment: back off instead of polling.
func (w *fairWaiter) retryIn(now time.Time, wait time.Duration) {
	if wait < fairMinBackoff {
		wait = w.backoff.next(fairMinBackoff, fairMaxBackoff)
	} else {
		w.backoff.reset()
	}
	w.due = now.Add(wait)
}

// attemptFailed answers the calls the attempt was for with err; a queued
// owner is then forgotten, and cancelled in Redis.
func (a *fairActor) attemptFailed(m *messages.Acquire, w *fairWaiter, err error) {
	a.redisError(OpAcquire, err)
	m.Req.Answer(messages.Result{Err: err})
	if w == nil {
		return
	}
	for _, r := range w.reqs {
		r.Req.Answer(messages.Result{Err: err})
	}
	a.forget(w)
}

// grant records a hold and tells the caller; a hold nobody took goes back.
func (a *fairActor) grant(m *messages.Acquire, sent time.Time) {
	k := holdKey{m.Owner, messages.Exclusive}
	h := a.granted(k, sent, m.Lease, 0, m.Lost)
	if !h.handTo(m, messages.Result{}) {
		a.owe(&a.owed, k, nil)
		return
	}
	if m.Lease == 0 {
		a.arm(renewAfter(a.now, sent, a.watchdog))
	}
}

// runOwed sends the first owed release that is due; false if none.
func (a *fairActor) runOwed(now time.Time) bool {
	o := a.owed.next(now)
	if o == nil {
		return false
	}
	a.ledger.send(&fairRelease{a: a, o: o})
	return true
}

// fairRelease is one owed fair_unlock.lua.
type fairRelease struct {
	a *fairActor
	o *owed
}

func (r *fairRelease) keep() time.Duration { return r.a.ledger.keepFor(r.o.lease) }

func (r *fairRelease) run(op redisio.Op) redisio.Reply {
	return r.a.rt.io.FairUnlock(r.a.rt.ctx, op, r.a.key.Name, r.o.field, r.o.lease, r.a.now)
}

func (r *fairRelease) apply(rep redisio.Reply) { r.a.released(r.o, rep) }
func (r *fairRelease) notRun(lost error)       { r.a.retryOwed(&r.a.owed, r.o, lost) }

// unknown: the hold was released or has expired by now.
func (r *fairRelease) unknown() { r.o.answer(messages.ReleaseResult{NotHeld: true}) }

func (r *fairRelease) fail(err error) {
	r.a.redisError(OpRelease, err)
	r.o.answer(pendingRelease(err)) // settled, then sent again if need be
}

func (a *fairActor) released(o *owed, r redisio.Reply) {
	res, err := r.Unlock()
	if err != nil {
		a.redisError(OpRelease, err)
		a.retryOwed(&a.owed, o, err)
		return
	}
	if res == redisio.NotHeld {
		a.foundGone(o) // Lost closes before the caller hears ErrNotHeld
	}
	o.answerRan(res, res == redisio.Released || res == redisio.Left)
	a.releasedAgain(&a.owed, o, res == redisio.StillHeld)
}

// runCancel sends the first fair_cancel that is due; false if none. Running
// it twice changes nothing, so it needs no latch; a failure is retried with
// backoff while the Client lives.
func (a *fairActor) runCancel(now time.Time) bool {
	for i, c := range a.cancels {
		if now.Before(c.due) {
			continue
		}
		a.cancels = append(a.cancels[:i], a.cancels[i+1:]...)
		a.cancelling++
		b := &a.base
		a.rt.io.FairCancelThen(a.rt.ctx, a.key.Name, c.owner, c.w, now, func(_ bool, err error) {
			b.post(&cancelled{c: c, err: err})
		})
		return true
	}
	return false
}

// cancelled is a fair_cancel's reply, posted back to the actor.
type cancelled struct {
	c   *fairCancel
	err error
}

// cancelled applies a fair_cancel's reply: a failure is retried with
// backoff.
func (a *fairActor) cancelled(m *cancelled) {
	a.cancelling--
	a.redisError(OpCancel, m.err)
	if m.err == nil {
		return
	}
	c := m.c
	a.rt.cfg.Logger.Debug("lockactor: fair cancel failed; retrying", "lock", a.key.Name, "err", m.err)
	if _, requeued := a.waiting[c.owner]; requeued {
		return // the owner waits again: its new place must stay
	}
	c.due = a.now.Add(c.backoff.next(owedMin, owedMax))
	a.cancels = append(a.cancels, c)
}

func (a *fairActor) renewOne(k holdKey, lease time.Duration, stale func() bool, then func(bool, error)) {
	a.rt.io.Renew(a.rt.ctx, a.key.Name, k.owner, lease, stale, then)
}
