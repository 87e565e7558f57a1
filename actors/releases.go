package actors

import (
	"time"

	"github.com/lockactor/lockactor/messages"
)

// owed is a release an actor owes Redis: a caller's Unlock, a grant given
// back because its caller had gone, or a retry of either after Redis did
// not confirm it. The hold was given up locally the moment it was owed (it
// is no longer renewed); Redis is told until it confirms, or until the
// hold's lease has run out, after which Redis has let it go by itself.
type owed struct {
	k     holdKey
	h     *hold         // the hold given up; nil when none was recorded
	last  bool          // it was its owner's last hold in this view
	lease time.Duration // re-applied when holds remain
	n     int           // semaphore permits given back
	m     *messages.Release

	due     time.Time
	backoff time.Duration
}

// answer tells the caller (once; later answers are dropped).
func (o *owed) answer(res messages.ReleaseResult) {
	if o.m != nil {
		o.m.Answer(res)
	}
}

// Owed releases that Redis did not confirm are retried after owedMin,
// doubling up to owedMax.
const (
	owedMin = 20 * time.Millisecond
	owedMax = time.Second
)

// later schedules o's next try, backing off.
func (o *owed) later(now time.Time, ceiling time.Duration) {
	o.backoff = min(max(2*o.backoff, owedMin), max(ceiling, owedMin))
	o.due = now.Add(o.backoff)
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

// owe gives up one hold of k (a caller's Release m, or nil for a grant
// nobody took) and queues its release for Redis.
func (hb *holdBook) owe(q *owedQueue, k holdKey, m *messages.Release) {
	lease := hb.leaseFor(k)
	h, last := hb.giveUp(k)
	q.push(&owed{k: k, h: h, last: last, lease: lease, m: m, due: time.Now()})
}

// retryOwed queues o again after a backoff, unless nothing was recorded to
// release (the caller has its answer) or the hold's lease has run out with
// no renewal since: Redis has let it go by itself.
func (hb *holdBook) retryOwed(q *owedQueue, o *owed) {
	now := time.Now()
	if o.h == nil {
		return
	}
	lease := hb.leaseOf(o.h.lease)
	if hb.holds[o.k] == nil && !now.Before(o.h.confirmed.Add(lease)) {
		return
	}
	o.later(now, min(owedMax, lease/3))
	q.push(o)
}
