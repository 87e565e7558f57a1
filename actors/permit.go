package actors

import (
	"time"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// A permit semaphore (KindPermit) is a semaphoreActor with permit requests:
// the same queue, subscription, adjustments and owed releases, but each request
// takes one permit under its Owner, the permit id, for its Lease, and each
// release gives back the permit of its Owner. Redis ends a lease by itself:
// any permit script first gives back the permits whose deadlines have
// passed, and such a return publishes nothing until a script runs. So a
// refused head also retries when the earliest lease the refusal reported
// ends (capped by the re-check period): an expired permit wakes a waiter
// without anyone's message.

// newPermitActor is the actor of a permit semaphore's name.
func newPermitActor(rt *Runtime, key Key, e *entry) *semaphoreActor {
	a := newSemaphoreActor(rt, key, e)
	a.attempt = func(m *messages.Acquire, queued bool) request {
		return &permAttempt{a: a, m: m, queued: queued, news: a.news, sent: a.now}
	}
	a.giveBack = func(o *owed) request { return &permGiveBack{a: a, o: o} }
	a.add = rt.io.PermitAdd
	return a
}

// permAttempt is one permit_acquire.lua.
type permAttempt struct {
	a      *semaphoreActor
	m      *messages.Acquire
	queued bool
	news   uint64    // the actor's Wakes when it was sent
	sent   time.Time // its lease counts from here at the latest
}

// keep: the record outlives the permit's lease (see ledger.keepFor).
func (r *permAttempt) keep() time.Duration { return r.a.ledger.keepFor(r.m.Lease) }

func (r *permAttempt) run(op redisio.Op) redisio.Reply {
	member, err := redisio.PermitMember(r.m.Owner)
	if err != nil {
		return redisio.Reply{Err: err}
	}
	return r.a.rt.io.PermitAcquire(r.a.rt.ctx, op, r.a.key.Name, member, r.m.Lease)
}

func (r *permAttempt) fail(err error) { r.a.attemptFailed(r.m, r.queued, err) }

func (r *permAttempt) notRun(error) {
	if !r.queued && r.m.Req.Pending() {
		r.a.direct = append([]*messages.Acquire{r.m}, r.a.direct...)
	}
}

// unknown: the permit may have been taken. A queued request tries again
// under the same id, which the script does not take twice; a permit taken
// for a caller that has gone returns when its lease ends.
func (r *permAttempt) unknown() { r.notRun(nil) }

func (r *permAttempt) apply(rep redisio.Reply) {
	a, m := r.a, r.m
	granted, next, err := rep.Permit()
	switch {
	case err != nil:
		a.attemptFailed(m, r.queued, err)
	case granted && rep.Unsynced:
		// Too few replicas confirmed the permit: it goes back at once, and
		// the request tries again (a direct one is told).
		a.owePermit(m.Owner)
		if !r.queued {
			m.Req.Answer(messages.Result{Err: rep.NotReplicated()})
		}
	case granted && stale(a.now, r.sent, m.Lease):
		// The reply came back after the permit's lease ran out: Redis may
		// have given the permit to someone else already. It goes back (in
		// case it is still there), and the request tries again after a
		// backoff (a single attempt reports none free).
		a.owePermit(m.Owner)
		a.late.tooLate(a.now)
		if !r.queued {
			m.Req.Answer(messages.Result{})
		}
	case granted:
		a.late.inTime()
		if r.queued {
			a.waiters.remove(m.Req)
		}
		if !m.Req.Answer(messages.Result{Granted: true}) {
			a.owePermit(m.Owner) // taken for a caller that has gone
		}
	case m.TryOnly:
		m.Req.Answer(messages.Result{})
	case r.news == a.news:
		wait := a.rt.cfg.SemaphoreRecheck
		if next >= 0 {
			// The earliest lease ends then; a millisecond later the script
			// finds it past (Redis's clock has millisecond steps).
			wait = min(wait, next+time.Millisecond)
		}
		a.verdict = semVerdict{until: a.now.Add(wait), permits: 1}
	}
}

// owePermit gives the permit id back to Redis, until Redis confirms.
func (a *semaphoreActor) owePermit(id string) {
	a.owed.push(&owed{k: holdKey{owner: id}, due: a.now})
}

// permGiveBack is one owed permit_release.lua: a Release, or a permit taken
// for a caller that had gone.
type permGiveBack struct {
	a *semaphoreActor
	o *owed
}

func (r *permGiveBack) keep() time.Duration { return r.a.ledger.keepFor(0) }

func (r *permGiveBack) run(op redisio.Op) redisio.Reply {
	member, err := redisio.PermitMember(r.o.k.owner)
	if err != nil {
		return redisio.Reply{Err: err}
	}
	return r.a.rt.io.PermitRelease(r.a.rt.ctx, op, r.a.key.Name, member)
}

func (r *permGiveBack) apply(rep redisio.Reply) {
	n, err := rep.Int()
	if err != nil {
		r.fail(err)
		r.a.retryGiveBack(r.o, err)
		return
	}
	r.o.answer(messages.ReleaseResult{NotHeld: n == 0})
	r.a.verdict = semVerdict{} // a permit came back: the head may fit now
}

func (r *permGiveBack) fail(err error) {
	r.a.redisError(OpRelease, err)
	r.o.answer(pendingRelease(err))
}

// unknown: the permit is taken as given back; if it was not, its lease
// gives it back.
func (r *permGiveBack) unknown() { r.a.verdict = semVerdict{} }

// notRun retries later, backing off: giving back an id twice gives back
// one permit, and a released id is simply not found.
func (r *permGiveBack) notRun(lost error) { r.a.retryGiveBack(r.o, lost) }
