package messages

import "time"

// Mode says which view of a lock a hold belongs to.
type Mode uint8

// The modes of a hold.
const (
	Exclusive Mode = iota // Lock, FencedLock, FairLock
	Read                  // a ReadWriteLock's read view
	Write                 // a ReadWriteLock's write view
)

// Acquire asks a lock actor for one hold (or, on a semaphore, permits) on
// behalf of Owner.
type Acquire struct {
	Owner   string        // "<clientUUID>:<handleID>"; empty for a semaphore
	Mode    Mode          // which view of a read-write lock
	Permits int           // semaphore permits wanted
	Lease   time.Duration // 0: watchdog-renewed hold
	Wait    time.Duration // how long the caller may wait; 0: unbounded (fair lock queue deadline)
	TryOnly bool          // one attempt, never queued
	Req     *Request      // where the answer goes
}

// Release asks for one hold of Owner in Mode to be given back.
type Release struct {
	Owner string
	Mode  Mode
	Reply chan ReleaseResult // nil when nobody waits for the answer
}

// ReleaseResult answers a Release.
type ReleaseResult struct {
	NotHeld bool  // Owner held nothing (or no longer)
	Gone    bool  // that was Owner's last hold in this view
	Err     error // a Redis error; nothing is known to have changed
}

// Abandon tells the actor that a queued request of Owner was withdrawn.
type Abandon struct {
	Owner string
	Req   *Request
}

// WakeReason says why waiters should try again.
type WakeReason int

// The reasons a lock actor retries for its waiters.
const (
	WakeMessage      WakeReason = iota // a message on the lock's channel
	WakeSubscribed                     // (re)subscribed: messages may have been missed
	WakeDisconnected                   // the subscription connection broke
	WakeTimer                          // the holder's TTL (or a re-check period) has run out
	WakeReleased                       // a local owner released or lost its last hold
)

// Wake asks the actor to make an attempt for its waiters.
type Wake struct {
	Reason  WakeReason
	Owner   string // a fair-lock waiter's own channel or timer; "" for the lock's
	Payload string // the message, for WakeMessage
}

// Extend re-applies Lease to Owner's hold if it still exists: a RedLock
// coordinator's renewal of one node.
type Extend struct {
	Owner string
	Mode  Mode
	Lease time.Duration
	Reply chan ExtendResult
}

// ExtendResult answers an Extend.
type ExtendResult struct {
	OK  bool  // the hold existed and the lease was re-applied
	Err error // a Redis error
}

// Lose marks Owner's hold as lost (its RedLock can no longer keep a
// majority): Lost closes and the actor stops tracking it.
type Lose struct {
	Owner string
	Mode  Mode
}

// RetryTick tells a group coordinator to try its pending acquisition again.
type RetryTick struct{}

// RenewTick is the watchdog's timer firing.
type RenewTick struct{}

// IdleTick is the actor's periodic check for idleness.
type IdleTick struct{}

// The messages implement protoactor's IgnoreDeadLetterLogging: a message that
// reaches a stopped actor (a late timer) is expected and must not be logged,
// nor start protoactor's log-throttle goroutine.

func (*Acquire) IgnoreDeadLetterLogging()   {} // see above
func (*Release) IgnoreDeadLetterLogging()   {} // see above
func (*Abandon) IgnoreDeadLetterLogging()   {} // see above
func (*Wake) IgnoreDeadLetterLogging()      {} // see above
func (*RenewTick) IgnoreDeadLetterLogging() {} // see above
func (*IdleTick) IgnoreDeadLetterLogging()  {} // see above
func (*Extend) IgnoreDeadLetterLogging()    {} // see above
func (*Lose) IgnoreDeadLetterLogging()      {} // see above
func (*RetryTick) IgnoreDeadLetterLogging() {} // see above
