package actors

import "strings"

// Observer hears what lock actors do, for metrics: the events only the
// actors see (renewals, lost holds, hand-offs, Redis errors). Config.Observer sets it; nopObserver
// is the default, so actors never check for nil.
//
// Calls come from actor goroutines, timers and callers, concurrently; an
// implementation must be safe for concurrent use, must not block and
// should not allocate.
type Observer interface {
	// Renewed reports one watchdog renewal of a hold (or a RedLock
	// coordinator's renewal of one node) and how it went.
	Renewed(key Key, outcome RenewOutcome)
	// Lost reports a hold found gone before its Unlock: its Lost channel
	// has just closed. Each hold is reported at most once.
	Lost(key Key)
	// HandedOff reports a release that gave the lock straight to the next
	// local waiter in the same script.
	HandedOff(key Key)
	// RedisError reports a Redis command of op that failed (after
	// go-redis's retries) on behalf of a caller or a renewal. Errors caused
	// by the runtime's own Close are not reported.
	RedisError(key Key, op RedisOp, err error)
}

// RenewOutcome is how a renewal went.
type RenewOutcome uint8

// The outcomes of a renewal.
const (
	RenewOK    RenewOutcome = iota // the lease was re-applied
	RenewGone                      // the hold was gone: lost
	RenewError                     // Redis did not answer or failed; retried while the lease lasts
	NumRenewOutcomes
)

// RedisOp names what an actor's failed Redis command was for.
type RedisOp uint8

// The operations whose Redis errors are reported.
const (
	OpAcquire RedisOp = iota // an acquire script (lock, fair lock, semaphore)
	OpRelease                // a release, hand-off or permits given back
	OpRenew                  // a watchdog or RedLock renewal
	OpCancel                 // a fair-lock waiter taken out of the Redis queue
	OpAdjust                 // AddPermits, TrySetPermits
	NumRedisOps
)

// NumKinds is the number of lock kinds (Kind values are below it).
const NumKinds = int(KindGroup) + 1

// nopObserver is an Observer that does nothing.
type nopObserver struct{}

// Renewed does nothing.
func (nopObserver) Renewed(Key, RenewOutcome) {}

// Lost does nothing.
func (nopObserver) Lost(Key) {}

// HandedOff does nothing.
func (nopObserver) HandedOff(Key) {}

// RedisError does nothing.
func (nopObserver) RedisError(Key, RedisOp, error) {}

// IsRedLock reports whether a KindGroup key names a RedLock's coordinator
// (else a MultiLock's): the Client names them "redlock#<n>" and
// "multilock#<n>".
func IsRedLock(key Key) bool {
	return key.Kind == KindGroup && strings.HasPrefix(key.Name, "redlock")
}

// redisError reports err from a command of op sent for b's lock, unless
// the runtime is closing (then the errors are Close's own doing).
func (b *base) redisError(op RedisOp, err error) {
	if err == nil || b.rt.ctx.Err() != nil {
		return
	}
	b.rt.cfg.Observer.RedisError(b.key, op, err)
}

// Census calls fn for every lock actor registered now (retiring ones
// excluded) with the number of callers queued in it: for a fair lock, the
// owners it keeps queued in Redis. Each actor publishes its count at the
// end of every message it handles.
func (rt *Runtime) Census(fn func(key Key, waiters int64)) {
	rt.locks.Range(func(k, v any) bool {
		fn(k.(Key), v.(*entry).waiters.Load())
		return true
	})
}

// Listening reports whether Redis has confirmed the runtime's subscription
// to channel. Every handler registered on it then has heard the
// confirmation: a lock actor that listens there has its Wake in its
// mailbox, ahead of any message sent to it after this returns true.
func (rt *Runtime) Listening(channel string) bool {
	return rt.ps.Barrier(rt.ctx, channel, func() {}) == nil
}
