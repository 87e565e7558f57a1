package messages

import (
	"sync/atomic"
	"time"
)

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
	// Lost, if set, is the channel a hold from zero holds closes when it
	// is lost, if no other hold claimed it first: one the caller handed
	// out before it held (a handle's Lost taken while nothing was held
	// belongs to its next hold). Otherwise the actor makes one.
	Lost *LostChan
	// OnLost, if set, is called once if the hold this grant joins is later
	// lost (a group coordinator hears of its members' losses so). It must
	// not block.
	OnLost func()
}

// LostChan is a Lost channel handed out before the hold that closes it
// exists. Several acquisitions may carry it (goroutines sharing a Mutex);
// the first hold from zero that claims it is its owner, and a grant
// nobody took gives it up again.
type LostChan struct {
	C       chan struct{}
	claimed atomic.Bool
}

// NewLostChan returns an unclaimed channel.
func NewLostChan() *LostChan { return &LostChan{C: make(chan struct{})} }

// Claim makes the caller's hold the channel's owner; false if another
// hold claimed it first (or l is nil).
func (l *LostChan) Claim() bool { return l != nil && l.claimed.CompareAndSwap(false, true) }

// Unclaim gives the channel up: the hold that claimed it never reached its
// caller, and never closes it.
func (l *LostChan) Unclaim() { l.claimed.Store(false) }

// Claimed reports whether a hold has claimed the channel.
func (l *LostChan) Claimed() bool { return l.claimed.Load() }

// Release asks for one hold of Owner in Mode to be given back (on a
// semaphore: Permits permits). The actor gives it up at once and keeps
// trying in Redis until Redis confirms; the answer says how the first
// attempt went.
type Release struct {
	Owner   string
	Mode    Mode
	Permits int                // semaphore permits given back
	Reply   chan ReleaseResult // buffered (1); nil when nobody waits for the answer
	// Then, when set, also receives the answer, on the answering actor's
	// goroutine (see NewRequestThen); it must not block.
	Then func(ReleaseResult)

	answered atomic.Bool
}

// ReleaseResult answers a Release.
type ReleaseResult struct {
	NotHeld bool  // Owner held nothing (or no longer)
	Gone    bool  // that was Owner's last hold in this view
	Err     error // a Redis error (or why the release could not be sent)
	Pending bool  // with Err: the actor goes on releasing in the background
}

// Answer delivers res once; later answers are dropped, and answering never
// blocks.
func (m *Release) Answer(res ReleaseResult) {
	if (m.Reply == nil && m.Then == nil) || !m.answered.CompareAndSwap(false, true) {
		return
	}
	select {
	case m.Reply <- res:
	default:
	}
	if m.Then != nil {
		m.Then(res)
	}
}

// Adjust changes a semaphore's permits: by N, or to N if SetOnly and they
// were never set.
type Adjust struct {
	N       int
	SetOnly bool
	Reply   chan AdjustResult // buffered (1)
}

// AdjustResult answers an Adjust.
type AdjustResult struct {
	Set bool  // SetOnly: the permits were set
	Err error // the change was not made, or its outcome is unknown
}

// Abandon tells the actor that a queued request of Owner was withdrawn.
type Abandon struct {
	Owner string
	Req   *Request
}

// Wake tells an actor that pub/sub has news for it: messages or a
// (re)subscription on the lock's channel, or on the own channel of fair-lock
// waiter Owner. Bursts coalesce: the actor reads what happened from the
// subscription's signal.
type Wake struct {
	Owner string // a fair-lock waiter's channel; "" for the lock's
}

// Tick is an actor's own timer firing: a retry, a re-check or a backoff is
// due.
type Tick struct{}

// Continue asks an actor to go on with work it paused so that other
// messages could run.
type Continue struct{}

// Extend re-applies Lease to Owner's hold if it still exists: a RedLock
// coordinator's renewal of one node, or a handle's Lock.Extend (Handle).
type Extend struct {
	Owner string
	Mode  Mode
	Lease time.Duration
	// Handle marks a handle's own Extend: only a fixed-lease hold that the
	// actor records, neither lost nor run out by its clock, is extended;
	// otherwise the actor answers without asking Redis (not OK, or
	// Watchdog for a watchdog-renewed hold).
	Handle bool
	Reply  chan ExtendResult // buffered (1); nil when Then takes the answer
	// Then, when set, receives the answer instead, on the answering
	// actor's goroutine; it must not block.
	Then func(ExtendResult)
}

// Answer delivers res to Then, or to Reply without blocking.
func (m *Extend) Answer(res ExtendResult) {
	if m.Then != nil {
		m.Then(res)
		return
	}
	select {
	case m.Reply <- res:
	default:
	}
}

// ExtendResult answers an Extend.
type ExtendResult struct {
	OK       bool  // the hold existed and the lease was re-applied
	Watchdog bool  // a Handle Extend of a watchdog-renewed hold: nothing was done
	Err      error // a Redis error
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
func (*Adjust) IgnoreDeadLetterLogging()    {} // see above
func (*Abandon) IgnoreDeadLetterLogging()   {} // see above
func (*Wake) IgnoreDeadLetterLogging()      {} // see above
func (*Tick) IgnoreDeadLetterLogging()      {} // see above
func (*Continue) IgnoreDeadLetterLogging()  {} // see above
func (*RenewTick) IgnoreDeadLetterLogging() {} // see above
func (*IdleTick) IgnoreDeadLetterLogging()  {} // see above
func (*Extend) IgnoreDeadLetterLogging()    {} // see above
func (*Lose) IgnoreDeadLetterLogging()      {} // see above
func (*RetryTick) IgnoreDeadLetterLogging() {} // see above
