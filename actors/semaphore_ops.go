package actors

import (
	"time"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// The scripts a semaphoreActor runs and what their replies do to its state.

// try sends the acquire script for m (queued: the head of the queue).
func (a *semaphoreActor) try(m *messages.Acquire, queued bool) {
	a.ledger.send(a.attempt(m, queued))
}

// semAttempt is one semaphore_acquire.lua.
type semAttempt struct {
	a      *semaphoreActor
	m      *messages.Acquire
	queued bool
	news   uint64 // the actor's Wakes when it was sent
}

func (r *semAttempt) keep() time.Duration { return r.a.ledger.keepFor(0) }

func (r *semAttempt) run(op redisio.Op) redisio.Reply {
	return r.a.rt.io.SemaphoreAcquire(r.a.rt.ctx, op, r.a.key.Name, r.m.Permits)
}

func (r *semAttempt) apply(rep redisio.Reply) { r.a.attempted(r, rep) }
func (r *semAttempt) fail(err error)          { r.a.attemptFailed(r.m, r.queued, err) }

func (r *semAttempt) notRun(error) {
	if !r.queued && r.m.Req.Pending() {
		r.a.direct = append([]*messages.Acquire{r.m}, r.a.direct...)
	}
}

// unknown: the permits may have been taken. They are taken as not: a
// queued request tries again (if they had been, they are lost to the
// semaphore, which errs on the side of fewer permits, never more).
func (r *semAttempt) unknown() { r.notRun(nil) }

func (a *semaphoreActor) attempted(at *semAttempt, r redisio.Reply) {
	m, queued := at.m, at.queued
	n, err := r.Int()
	switch {
	case err != nil:
		a.attemptFailed(m, queued, err)
	case n == 1 && r.Unsynced:
		// Too few replicas confirmed the permits: they go back at once,
		// and the request tries again (a direct one is told).
		a.owed.push(&owed{n: m.Permits, due: a.now})
		if !queued {
			m.Req.Answer(messages.Result{Err: r.NotReplicated()})
		}
	case n == 1:
		if queued {
			a.waiters.remove(m.Req)
		}
		if !m.Req.Answer(messages.Result{Granted: true}) {
			// Taken for a caller that has gone: they go straight back.
			a.owed.push(&owed{n: m.Permits, due: a.now})
		}
	case m.TryOnly:
		m.Req.Answer(messages.Result{})
	case at.news == a.news:
		a.verdict = semVerdict{until: a.now.Add(a.rt.cfg.SemaphoreRecheck), permits: m.Permits}
	}
}

func (a *semaphoreActor) attemptFailed(m *messages.Acquire, queued bool, err error) {
	a.redisError(OpAcquire, err)
	m.Req.Answer(messages.Result{Err: err})
	if queued {
		a.waiters.remove(m.Req)
		a.waiters.drain(func(w *messages.Acquire) { w.Req.Answer(messages.Result{Err: err}) })
	}
}

// runOwed gives back the first owed permits that are due; false if none.
// Permits are retried until Redis confirms them, for as long as the Client
// lives: unlike a lock, nothing expires them.
func (a *semaphoreActor) runOwed(now time.Time) bool {
	o := a.owed.next(now)
	if o == nil {
		return false
	}
	a.ledger.send(a.giveBack(o))
	return true
}

// semGiveBack is one owed semaphore_release.lua.
type semGiveBack struct {
	a *semaphoreActor
	o *owed
}

func (r *semGiveBack) keep() time.Duration { return r.a.ledger.keepFor(0) }

func (r *semGiveBack) run(op redisio.Op) redisio.Reply {
	return r.a.rt.io.SemaphoreAdd(r.a.rt.ctx, op, r.a.key.Name, r.o.n)
}

func (r *semGiveBack) apply(rep redisio.Reply) {
	if _, err := rep.Int(); err != nil {
		r.fail(err)
		r.a.retryGiveBack(r.o, err)
		return
	}
	r.o.answer(messages.ReleaseResult{})
	r.a.verdict = semVerdict{} // more permits: the head may fit now
}

func (r *semGiveBack) fail(err error) {
	r.a.redisError(OpRelease, err)
	r.o.answer(pendingRelease(err))
}

// unknown: the permits are taken as given back; sending them again could
// make more permits than there are (see semAttempt.unknown).
func (r *semGiveBack) unknown() { r.a.verdict = semVerdict{} }

// notRun retries later, backing off.
func (r *semGiveBack) notRun(lost error) { r.a.retryGiveBack(r.o, lost) }

// retryGiveBack queues the permits of o to be given back again after a
// backoff, after an attempt that failed with err; not when Redis refused
// them for good (see refusedForGood).
func (a *semaphoreActor) retryGiveBack(o *owed, err error) {
	if a.refusedForGood(err) {
		return
	}
	o.later(a.now, owedMax)
	a.owed.push(o)
}

// adjust runs an AddPermits or TrySetPermits once. Its answer is final when
// Redis gave one; when the reply was lost it waits for the settlement, and
// if that fails too the caller is told the outcome is unknown.
func (a *semaphoreActor) adjust(m *messages.Adjust) {
	a.ledger.send(&semAdjust{a: a, m: m})
}

// semAdjust is one AddPermits (semaphore_release.lua) or TrySetPermits
// (semaphore_set.lua).
type semAdjust struct {
	a *semaphoreActor
	m *messages.Adjust
}

func (r *semAdjust) keep() time.Duration { return r.a.ledger.keepFor(0) }

func (r *semAdjust) run(op redisio.Op) redisio.Reply {
	if r.m.SetOnly {
		return r.a.rt.io.SemaphoreSet(r.a.rt.ctx, op, r.a.key.Name, r.m.N)
	}
	return r.a.add(r.a.rt.ctx, op, r.a.key.Name, r.m.N)
}

func (r *semAdjust) apply(rep redisio.Reply) {
	n, err := rep.Int()
	r.a.redisError(OpAdjust, err)
	answerAdjust(r.m, messages.AdjustResult{Set: r.m.SetOnly && n == 1, Err: err})
	if err == nil {
		r.a.verdict = semVerdict{}
	}
}

func (r *semAdjust) notRun(error) { answerAdjust(r.m, messages.AdjustResult{Err: errNotApplied}) }

// unknown: the caller has been told of the error that lost the reply (fail).
func (r *semAdjust) unknown() {}

func (r *semAdjust) fail(err error) {
	r.a.redisError(OpAdjust, err)
	answerAdjust(r.m, messages.AdjustResult{Err: err})
}
