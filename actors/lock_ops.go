package actors

import (
	"time"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// The scripts a lockActor runs and what their replies do to its state. Each
// runs from reconcile, one at a time, through the ledger.

// try sends m's acquire script; queued says m waits in the queue (else it is
// a direct attempt).
func (a *lockActor) try(m *messages.Acquire, queued bool) {
	r := &lockAttempt{a: a, m: m, queued: queued, byMsg: queued && a.wokenByMsg, yielded: queued && a.yielding,
		long: queued && a.yielding && a.foreign.long, sent: a.now, lease: a.leaseOf(m.Lease), news: a.news, notes: a.foreign.notes}
	if queued {
		a.wokenByMsg, a.yielding, a.foreign.long = false, false, false
	}
	a.ledger.send(r)
}

// lockAttempt is one acquire script, for a queued or a direct request.
type lockAttempt struct {
	a       *lockActor
	m       *messages.Acquire
	queued  bool // m waits in the queue; else a direct attempt
	byMsg   bool // it answers a release message
	yielded bool // it follows a yield to other processes
	long    bool // it follows a long yield that ran to its end (yield.go)
	sent    time.Time
	lease   time.Duration
	news    uint64 // the actor's news count when it was sent
	notes   uint64 // foreignWaiters.notes when it was sent
}

func (r *lockAttempt) keep() time.Duration { return r.a.ledger.keepFor(r.lease) }

func (r *lockAttempt) run(op redisio.Op) redisio.Reply {
	return r.a.scheme.acquire(r.a, op, r.m, r.lease)
}

func (r *lockAttempt) apply(rep redisio.Reply) {
	r.a.attempted(r, rep)
}

func (r *lockAttempt) fail(err error) { r.a.attemptFailed(r.m, r.queued, err) }

// notRun: a queued request just stays queued; a direct one goes again first.
func (r *lockAttempt) notRun(error) {
	if !r.queued && r.m.Req.Pending() {
		r.a.direct = append([]*messages.Acquire{r.m}, r.a.direct...)
	}
}

// unknown: a grant it may have made has expired; it is as if it had not run.
func (r *lockAttempt) unknown() { r.notRun(nil) }

// attempted applies an acquire script's reply.
func (a *lockActor) attempted(at *lockAttempt, r redisio.Reply) {
	m, queued, sent := at.m, at.queued, at.sent
	res, err := a.scheme.read(m, r)
	behind := err == nil && res.ok && a.tokenBehind(m, sent, res.token)
	switch {
	case err != nil:
		a.attemptFailed(m, queued, err)
	case res.ok && (r.Unsynced || stale(a.now, sent, at.lease) || behind):
		// Too few replicas confirmed the grant (a failover could lose it),
		// or the reply came back so late that the hold may be gone
		// already, or its fencing token is not above one this Client saw:
		// give it back and try again rather than hand out a lease or a
		// token that cannot be trusted.
		a.takeBack(m, sent, res.token)
		if !r.Unsynced && !behind {
			a.late.tooLate(a.now)
		}
		switch {
		case m.TryOnly && r.Unsynced:
			m.Req.Answer(messages.Result{Err: r.NotReplicated()})
		case m.TryOnly && behind && !stale(a.now, sent, at.lease):
			// The lock was ours: try once more, after the give-back,
			// with the token seen as the floor.
			a.direct = append([]*messages.Acquire{m}, a.direct...)
		case m.TryOnly:
			m.Req.Answer(messages.Result{})
		case !queued:
			a.waiters.push(m)
		}
	case res.ok:
		if queued {
			a.waiters.remove(m.Req)
		}
		if at.yielded || at.byMsg {
			a.outrun = time.Time{}
		}
		if queued {
			a.tried(at, true)
		}
		a.grant(m, sent, res.token, nil)
		if at.byMsg && a.scheme.exclusive() {
			// We won the race a release message started: go to the back of
			// the channel's subscribers so other processes go first next time.
			_ = a.rt.ps.Requeue(a.rt.ctx, a.scheme.channel(a.key.Name))
		}
	case res.upgrade:
		m.Req.Answer(messages.Result{Upgrade: true})
		if queued {
			a.waiters.remove(m.Req)
		}
	default:
		if at.yielded && a.outrun.IsZero() {
			a.outrun = a.now // another process took its turn
		}
		if queued {
			a.tried(at, false)
		}
		if at.news == a.news {
			a.refused(m, res.ttl)
		}
		if m.TryOnly {
			m.Req.Answer(messages.Result{TTL: res.ttl})
		} else if !queued {
			// An owner whose hold is gone waits like everyone else.
			a.waiters.push(m)
		}
	}
}

// attemptFailed answers m with err. An attempt made for the queue failed on
// the queue's behalf: every waiter gets the error rather than sleeping on a
// Redis that does not answer.
func (a *lockActor) attemptFailed(m *messages.Acquire, queued bool, err error) {
	a.redisError(OpAcquire, err)
	m.Req.Answer(messages.Result{Err: err})
	if queued {
		a.waiters.remove(m.Req)
		a.waiters.drain(func(w *messages.Acquire) { w.Req.Answer(messages.Result{Err: err}) })
	}
}

// refused records what a refusal says: the holder keeps the lock for ttl.
func (a *lockActor) refused(m *messages.Acquire, ttl time.Duration) {
	if ttl < 0 {
		ttl = a.watchdog // a key without expiry: look again after a lease
	}
	ttl = a.spin.retryIn(ttl, a.heldFor())
	a.verdict = verdict{until: a.now.Add(ttl), all: a.scheme.exclusive() || m.Mode == messages.Read}
}

// grant records a hold taken at sent (from is set for a relay: the hold
// it takes over) and tells the caller; if the caller has already gone (or
// was told of an error), the hold goes straight back.
func (a *lockActor) grant(m *messages.Acquire, sent time.Time, token uint64, from *relayed) {
	k := holdKey{m.Owner, m.Mode}
	if a.scheme.exclusive() && a.holds[k] == nil {
		field := m.Owner
		if from != nil {
			field = from.field
		}
		a.supersede(k, field)
	}
	h := a.granted(k, sent, m.Lease, token, m.Lost)
	if from != nil {
		h.field, h.until = from.field, from.until
	}
	a.spin.reset()
	a.late.inTime()
	// Until this hold ends, other waiters would be refused (readers still
	// share a read hold).
	a.verdict = verdict{until: sent.Add(a.leaseOf(m.Lease)), all: m.Mode != messages.Read}
	if !h.handTo(m, messages.Result{Token: h.token, Field: h.field}) {
		a.rt.cfg.Logger.Debug("lockactor: grant given back: its caller had gone", "lock", a.key.Name, "owner", m.Owner)
		a.owe(k, nil)
		return
	}
	if m.Lease == 0 {
		a.arm(renewAfter(a.now, sent, a.watchdog))
	}
}

// supersede closes the Lost of every other hold recorded when k gets a
// fresh exclusive hold under field: Redis found the lock free, or held
// under field only, so those holds had already ended there (a ForceUnlock,
// a lease that ran out, a failover that lost them) before a renewal could
// tell. Until now they only waited for that renewal; a relay must never
// pass one on, nor a hold given up whose release is still owed: those
// are put in doubt (see onWake).
func (a *lockActor) supersede(k holdKey, field string) {
	for other, h := range a.holds {
		if other != k && a.holdBook.fieldOf(other) != field {
			a.rt.cfg.Logger.Debug("lockactor: a grant shows another local hold was gone", "lock", a.key.Name,
				"owner", other.owner, "granted", k.owner)
			a.gone(other, h)
		}
	}
	for _, o := range a.owed.items {
		if o.h != nil && o.field != field {
			// The grant's script ran at some time up to now, perhaps
			// after that hold's last renewal (a late reply): every hold
			// confirmed before now is in doubt, the new one too, until
			// Redis confirms it again.
			a.doubted = a.now
			break
		}
	}
}

// tokenFloor is the floor fenced_lock.lua's token must rise above for an
// acquire by owner at now: for a reentrant grant of a hold owner has, its
// token minus one (the grant keeps that token, and a counter that went
// back below it is put back to it); otherwise the highest token the
// Client has seen for the name, so that a new hold's token is above every
// one the Client has handed out for it. fresh says which: true for a new
// hold (the script then draws a new token, even when Redis still has a
// stale hold of owner's field, as after a failover that lost its release).
func (a *lockActor) tokenFloor(owner string, now time.Time) (floor uint64, fresh bool) {
	if h := a.holds[holdKey{owner, messages.Exclusive}]; h.continues(now) && h.token > 0 {
		return h.token - 1, false
	}
	return a.rt.tokens.floor(a.key.Name), true
}

// tokenBehind records a fenced grant's token as seen by the Client and
// reports whether the grant must not be handed out: it would start a new
// hold (a reentrant grant keeps its hold's token) with a token not above
// one the Client saw before. fenced_lock.lua never grants below the floor
// it was sent, so this only happens when the floor was a hold's own and
// that hold was found lost while the script ran; the grant is given back
// and the retry is sent with the Client's highest token as its floor.
func (a *lockActor) tokenBehind(m *messages.Acquire, sent time.Time, token uint64) bool {
	if !a.scheme.fences() {
		return false
	}
	before := a.rt.tokens.saw(a.key.Name, token)
	if a.holds[holdKey{m.Owner, m.Mode}].continues(sent) || token > before {
		return false
	}
	a.rt.cfg.Logger.Warn("lockactor: fencing token not above one this Client saw; giving the grant back",
		"lock", a.key.Name, "token", token, "seen", before)
	return true
}

// takeBack records a grant for m that Redis made but m's caller must not
// get (unconfirmed by replicas, too late to trust, or with a fencing token
// behind one the Client saw), and owes its release at once; the lock may be
// free again, so the last verdict no longer holds.
func (a *lockActor) takeBack(m *messages.Acquire, sent time.Time, token uint64) {
	k := holdKey{m.Owner, m.Mode}
	a.rt.cfg.Logger.Debug("lockactor: grant given back", "lock", a.key.Name, "owner", m.Owner)
	a.granted(k, sent, m.Lease, token, nil)
	a.owe(k, nil)
	a.forgetVerdict()
}

// owe gives up one hold of k and queues its release (see holdBook.owe).
func (a *lockActor) owe(k holdKey, m *messages.Release) { a.holdBook.owe(&a.owed, k, m) }

// runOwed sends the first owed release that is due; false if none. With a
// local waiter to take over, the release hands the lock to it in the same
// script.
func (a *lockActor) runOwed(now time.Time) bool {
	o := a.owed.next(now)
	if o == nil {
		return false
	}
	head := a.handoffTarget(o, now)
	switch {
	case head != nil && a.relays(o, head, now):
		a.relay(o, head)
		return true
	case head != nil && head.Owner == o.field:
		// A hold relayed from head: handoff.lua would release and grant
		// one field. Release it; head tries once Redis has it.
		head = nil
	}
	r := &lockRelease{a: a, o: o, head: head, sent: now, noted: head == nil && a.foreign.knows(now)}
	if r.head != nil {
		r.nextLease = a.leaseOf(r.head.Lease)
	}
	a.ledger.send(r)
	return true
}

// lockRelease is one owed release, or a hand-off to head when head is set.
type lockRelease struct {
	a         *lockActor
	o         *owed
	head      *messages.Acquire
	nextLease time.Duration
	sent      time.Time
	noted     bool // a release with the note for other lockactor Clients (yield.go)
}

func (r *lockRelease) keep() time.Duration {
	return r.a.ledger.keepFor(max(r.o.lease, r.nextLease))
}

func (r *lockRelease) run(op redisio.Op) redisio.Reply {
	k := holdKey{r.o.field, r.o.k.mode} // the hold's hash field (see hold.field)
	if r.head != nil {
		return r.a.scheme.handoff(r.a, op, k, r.o.lease, r.head, r.nextLease)
	}
	return r.a.scheme.release(r.a, op, k, r.o.lease, r.noted)
}

func (r *lockRelease) apply(rep redisio.Reply) { r.a.released(r.o, r.head, r.sent, rep) }
func (r *lockRelease) notRun(lost error)       { r.a.retryOwed(r.o, lost) }

// unknown: the hold was released or has expired by now; either way it is
// gone (and a hand-off's grant has expired: head still waits).
func (r *lockRelease) unknown() {
	r.o.answer(messages.ReleaseResult{NotHeld: true})
	r.a.forgetVerdict()
}

func (r *lockRelease) fail(err error) {
	r.a.redisError(OpRelease, err)
	r.o.answer(pendingRelease(err)) // settled, then sent again if need be
}

// handoffTarget is the waiter o's release may hand the lock to (in the
// same script, or by a relay), or nil: only an owner's last exclusive
// hold, to another owner's exclusive request (one that owes no release),
// within a run of HandoffRun grants and HandoffRunTime (a run goes on
// while no other connection listens on the lock's channel).
func (a *lockActor) handoffTarget(o *owed, now time.Time) *messages.Acquire {
	if !a.scheme.handsOff() || !o.last || o.k.mode != messages.Exclusive {
		return nil
	}
	if a.runOver(now) {
		if a.others {
			return nil
		}
		a.handoffs = 0 // nobody else listens: the run goes on
	}
	head := a.waiters.front()
	if head == nil || head.Owner == o.k.owner || head.Mode != messages.Exclusive || a.owed.owes(head.Owner) {
		// An owner that owes a release takes nothing until Redis has it:
		// its hash field is the same for both holds, so the owed release
		// would free the lock handed to it.
		return nil
	}
	return head
}

// released applies a release script's reply.
func (a *lockActor) released(o *owed, head *messages.Acquire, sent time.Time, r redisio.Reply) {
	res, err := r.Unlock()
	if err != nil {
		a.redisError(OpRelease, err)
		a.retryOwed(o, err)
		return
	}
	if res == redisio.NotHeld {
		a.rt.cfg.Logger.Debug("lockactor: release found nothing held", "lock", a.key.Name, "owner", o.k.owner,
			"caller", o.m != nil, "recorded", o.h != nil)
	}
	if res == redisio.NotHeld {
		// The hold had been lost before the release: Lost closes before the
		// caller hears ErrNotHeld.
		a.foundGone(o)
	}
	o.answerRan(res, res == redisio.Released || res == redisio.ReleasedQuiet || res == redisio.Left || res == redisio.HandedOver)
	a.releasedAgain(&a.owed, o, res == redisio.StillHeld)
	switch res {
	case redisio.NotHeld:
		a.forgetVerdict()
	case redisio.HandedOver:
		a.ranHandoff()
		if r.Unsynced || stale(a.now, sent, a.leaseOf(head.Lease)) {
			// The new holder's grant is not on enough replicas, or came
			// back too late to trust (see attempted): undo it; head stays
			// queued and tries again.
			a.takeBack(head, sent, 0)
			if !r.Unsynced {
				a.late.tooLate(a.now)
			}
			return
		}
		a.waiters.remove(head.Req)
		a.rt.cfg.Observer.HandedOff(a.key)
		a.grant(head, sent, 0, nil)
	case redisio.Released, redisio.ReleasedQuiet, redisio.Left:
		if res == redisio.ReleasedQuiet && a.spin.publishes() {
			// The server refused the publish (an ACL): the release
			// stands; listeners elsewhere wake at their next retry.
			a.rt.io.Untold(a.key.Name)
		}
		if res == redisio.Released && a.subID != 0 {
			a.echo.published(a.now)
		}
		if a.runOver(a.now) || a.handoffs > 0 && a.others {
			// The end of a run of hand-offs, at its bound or for want of a
			// local waiter to take the lock (the owners it served are on
			// their way back, behind the release): our own release message
			// wakes the local waiters, fairly, with everyone else's; a spin
			// lock's hear none, and hold back instead (see spinner). With
			// no message sent (refused), nobody else was told either:
			// local waiters try now, below.
			a.handoffs = 0
			if d := a.spin.pause(); d > 0 {
				a.verdict = verdict{until: a.now.Add(d), all: true}
				return
			}
			if res != redisio.ReleasedQuiet {
				return
			}
		}
		a.handoffs = 0
		a.forgetVerdict()
	}
}

func (a *lockActor) retryOwed(o *owed, err error) { a.holdBook.retryOwed(&a.owed, o, err) }

// runOver reports whether the run of hand-offs has reached its bound, in
// grants or in time; the release that follows frees the lock for everyone.
func (a *lockActor) runOver(now time.Time) bool {
	return a.handoffs >= HandoffRun || (a.handoffs > 0 && now.Sub(a.runStart) >= a.rt.cfg.RunTime)
}

// ranHandoff counts one more hand-off (a script's or a relay) in the run.
func (a *lockActor) ranHandoff() {
	if a.handoffs == 0 {
		a.runStart = a.now
	}
	a.handoffs++
	if a.handoffs == HandoffRun/2 {
		a.countOthers() // known by the run's end
	}
}

// renewOne renews k's hold under its hash field (see hold.field).
func (a *lockActor) renewOne(k holdKey, lease time.Duration, stale func() bool, then func(bool, error)) {
	a.scheme.renew(a, holdKey{a.holdBook.fieldOf(k), k.mode}, lease, stale, then)
}
