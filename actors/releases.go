package actors

import (
	"time"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// owed is a release an actor owes Redis: a caller's Unlock, a grant given
// back because its caller had gone, or a retry of either after Redis did
// not confirm it. The hold was given up locally the moment it was owed (it
// is no longer renewed); Redis is told until it confirms, or until the
// hold's lease has surely run out, after which Redis has let it go by
// itself. While a release of an owner is owed, no acquire of that owner is
// sent and no hand-off is made to it (see owedQueue.owes): its hash field
// is the same for every hold, so a release that reached Redis after a
// newer grant would free that grant.
type owed struct {
	k     holdKey
	field string        // the owner Redis keeps the hold under (see hold.field)
	h     *hold         // the hold given up; nil when none was recorded
	last  bool          // it was its owner's last hold in this view
	lease time.Duration // re-applied when holds remain
	n     int           // semaphore permits given back
	m     *messages.Release
	tries int // attempts that failed
	// ghost: a hold this Client released that a master switch brought
	// back (ghosts.go); released until its field is gone.
	ghost bool

	due     time.Time
	backoff backoff
}

// answer tells the caller (once; later answers are dropped).
func (o *owed) answer(res messages.ReleaseResult) {
	if o.m != nil {
		o.m.Answer(res)
	}
}

// answerRan tells the caller what its release did in Redis: res, gone
// when that was the field's last hold. A release of a hold the record no
// longer kept when its owner gave it up is not held, whatever Redis says:
// the record had dropped it as lost (Lost closed) or run out, and the
// release may have reached a server that still had it (the former master,
// while a switch's re-read found the hold missing on the new one). So is
// one whose Lost had closed while it was still kept (its deadline passed:
// no renewal confirmed in time, or its fixed lease ran out by the local
// count). Unlock must not report released a hold whose Lost closed (a
// strict torture run: lost-after-release on a fair lock).
func (o *owed) answerRan(res redisio.UnlockResult, gone bool) {
	if (o.h == nil && !o.ghost) || (o.h != nil && o.h.isLost()) {
		o.answer(messages.ReleaseResult{NotHeld: true})
		return
	}
	o.answer(messages.ReleaseResult{NotHeld: res == redisio.NotHeld, Gone: gone})
}

// Owed releases that Redis did not confirm are retried after owedMin,
// doubling up to owedMax.
const (
	owedMin = 20 * time.Millisecond
	owedMax = time.Second
)

// later schedules o's next try, backing off.
func (o *owed) later(now time.Time, ceiling time.Duration) {
	o.due = now.Add(o.backoff.next(owedMin, ceiling))
}

// owedQueue holds an actor's owed releases in the order they were owed.
type owedQueue struct{ items []*owed }

func (q *owedQueue) push(o *owed) { q.items = append(q.items, o) }

// next removes and returns the first release due at now, or nil.
func (q *owedQueue) next(now time.Time) *owed {
	for i, o := range q.items {
		if !now.Before(o.due) {
			q.items = append(q.items[:i], q.items[i+1:]...)
			return o
		}
	}
	return nil
}

// due is the earliest time a queued release is due; zero when none is.
func (q *owedQueue) due() time.Time {
	var at time.Time
	for _, o := range q.items {
		if at.IsZero() || o.due.Before(at) {
			at = o.due
		}
	}
	return at
}

func (q *owedQueue) len() int { return len(q.items) }

// tellStalled answers, with err, callers that wait behind a settlement
// Redis keeps failing (see ledger.stalled): single attempts (TryLock,
// TryAcquire) are dropped, as they failed; the callers of owed releases
// hear err while their releases stay queued for when Redis answers, as a
// release that fails twice does (retryOwed). Queued waiters keep waiting,
// bounded by their ctx.
func tellStalled(direct *[]*messages.Acquire, q *owedQueue, err error) {
	kept := (*direct)[:0]
	for _, m := range *direct {
		if m.TryOnly {
			m.Req.Answer(messages.Result{Err: err})
			continue
		}
		kept = append(kept, m)
	}
	clear((*direct)[len(kept):])
	*direct = kept
	for _, o := range q.items {
		o.answer(pendingRelease(err))
	}
}

// owes reports whether a release of owner's hash field is queued (a
// hold relayed from owner is released under owner's field).
func (q *owedQueue) owes(owner string) bool {
	for _, o := range q.items {
		if o.field == owner {
			return true
		}
	}
	return false
}

// owe gives up one hold of k (a caller's Release m, or nil for a grant
// nobody took) and queues its release for Redis.
func (hb *holdBook) owe(q *owedQueue, k holdKey, m *messages.Release) {
	lease, field := hb.leaseFor(k), hb.fieldOf(k)
	h, last := hb.giveUp(k)
	q.push(&owed{k: k, field: field, h: h, last: last, lease: lease, m: m, due: hb.b.now})
	// Remembered from now, not from Redis's confirmation: a switch's last
	// read may come while this release is on its way to the old master.
	hb.b.rt.noteReleased(hb.b.key, holdKey{field, k.mode}, hb.b.now)
}

// foundGone applies a release of o's hold that found nothing held: the
// hold was lost, and Lost closes. Not so for an earlier release of a
// reentrant hold sent again after a failure, behind the owner's last: once
// the owner has released its last hold, that last release speaks for the
// hold, and it may have been answered already (a Sentinel switch between
// the two can leave one on each master).
func (hb *holdBook) foundGone(o *owed) {
	if o.h == nil || !o.h.handed.Load() || (!o.last && hb.holds[o.k] != o.h) {
		return
	}
	hb.gone(o.k, o.h)
}

// retryOwed queues o again after a backoff, after an attempt that failed
// with err (a Redis error, or the error that lost the reply of an attempt
// that did not run). The caller hears err from the second failure on: a
// first retry is quick and usually goes through, but Unlock must not wait
// for an outage to end, so the release goes on in the background. Nothing
// is retried when Redis refused it for good (redisio.Final: the name holds
// another kind's data; the caller hears why), when nothing was recorded to
// release, or once the hold's lease has surely run out in Redis with no
// renewal since: Redis has let it go by itself, and a caller not told yet
// hears ErrNotHeld.
func (hb *holdBook) retryOwed(q *owedQueue, o *owed, err error) {
	o.tries++
	now := hb.b.now
	switch {
	case hb.b.refusedForGood(err):
		o.answer(messages.ReleaseResult{Err: err})
		return
	case o.ghost && err != nil:
		hb.b.rt.cfg.Logger.Warn(LogReleasedAgainFailed, "lock", hb.b.key.Name, "owner", o.field, "err", err)
		return // best effort: the next read after a switch may find it again
	case o.h == nil && err != nil:
		o.answer(messages.ReleaseResult{Err: err})
		return
	case o.h == nil || (hb.holds[o.k] == nil && !now.Before(o.h.until)):
		hb.b.rt.cfg.Logger.Debug("lockactor: release dropped: its lease has run out", "lock", hb.b.key.Name, "owner", o.k.owner, "err", err)
		o.answer(messages.ReleaseResult{NotHeld: true})
		return
	case o.tries >= 2 && err != nil:
		o.answer(pendingRelease(err))
	}
	o.later(now, min(owedMax, hb.leaseOf(o.h.lease)/3))
	q.push(o)
}

// pendingRelease is the answer to a release whose try Redis failed: the
// error, and whether the runtime goes on releasing in the background (for
// every error but a refusal for good, redisio.Final).
func pendingRelease(err error) messages.ReleaseResult {
	return messages.ReleaseResult{Err: err, Pending: !redisio.Final(err)}
}

// refusedForGood reports, and logs, a release that Redis refused for good
// (redisio.Final: the name holds another kind's data, or no number): the
// owed release is not retried, since a copy sent later could land once the
// key was freed, and release what nobody holds or mint permits.
func (b *base) refusedForGood(err error) bool {
	if !redisio.Final(err) {
		return false
	}
	b.rt.cfg.Logger.Warn(LogRefusedForGood, "lock", b.key.Name, "err", err)
	return true
}

// LogRefusedForGood is the message of the Warn record logged when Redis
// refused a release for good and it is not sent again (see
// redisio.Final); its attributes are lock (the name) and err.
const LogRefusedForGood = "lockactor: release refused for good; not retried"
