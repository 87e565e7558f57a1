package lockactor

import (
	"time"

	"github.com/lockactor/lockactor/actors"
)

// redLockNodeTimeout is how long a RedLock's coordinator waits for one
// node's answer in a round: small against the lease, as the Redlock
// algorithm asks, so a dead or frozen node costs little.
const redLockNodeTimeout = 50 * time.Millisecond

// A RedLock holds a majority (len/2+1) of its locks, each from a Client on an
// independent Redis master: the Redlock algorithm. Each round asks every node
// in parallel and counts a node that does not answer within 50 ms as failed;
// the lock is held when a majority granted and time is left of the lease; on
// failure every node is released, including those that did not answer.
// Without WithLease the coordinator renews every node every lease/3 (the
// lease is the first member's Client's watchdog timeout) and closes every
// member's Lost when a majority can no longer be renewed.
type RedLock struct{ group }

// NewRedLock groups locks into a RedLock. No locks or a nil lock surface as
// ErrInvalidArgument from the first call.
func NewRedLock(locks ...*Lock) *RedLock {
	return &RedLock{newGroup(kindRed, locks)}
}

// Validity is the guaranteed remaining time of the current hold: the lease
// minus the time the acquisition (or the last renewal round) took minus the
// clock-drift allowance (1% of the lease + 2 ms); 0 when not held.
func (r *RedLock) Validity() time.Duration {
	if r.err != nil {
		return 0
	}
	return actors.ValidityLeft(r.g.ValidUntil.Load(), time.Now())
}

var _ Locker = (*RedLock)(nil)
