package messages

import "time"

// Acquire asks a lock actor for one hold on behalf of Owner.
type Acquire struct {
	Owner   string        // "<clientUUID>:<handleID>"
	Lease   time.Duration // 0: watchdog-renewed hold
	TryOnly bool          // one attempt, never queued
	Req     *Request      // where the answer goes
}

// Release asks for one hold of Owner to be given back.
type Release struct {
	Owner string
	Reply chan ReleaseResult // nil when nobody waits for the answer
}

// ReleaseResult answers a Release.
type ReleaseResult struct {
	NotHeld bool  // Owner held nothing (or no longer)
	Err     error // a Redis error; nothing is known to have changed
}

// Abandon tells the actor that a queued request was withdrawn.
type Abandon struct{ Req *Request }

// WakeReason says why the head waiter should try again.
type WakeReason int

// The reasons a lock actor retries for its head waiter.
const (
	WakeMessage      WakeReason = iota // an unlock message on the channel
	WakeSubscribed                     // (re)subscribed: messages may have been missed
	WakeDisconnected                   // the subscription connection broke
	WakeTimer                          // the holder's TTL has run out
	WakeReleased                       // a local owner released its last hold
)

// Wake asks the actor to make one attempt for its head waiter.
type Wake struct{ Reason WakeReason }

// RenewTick is the watchdog's timer firing.
type RenewTick struct{}

// IdleTick is the actor's periodic check for idleness.
type IdleTick struct{}

// IgnoreDeadLetterLogging keeps protoactor from logging (and from starting its
// log throttle goroutine) when a message reaches an actor that has stopped.
func (*Acquire) IgnoreDeadLetterLogging()   {}
func (*Release) IgnoreDeadLetterLogging()   {}
func (*Abandon) IgnoreDeadLetterLogging()   {}
func (*Wake) IgnoreDeadLetterLogging()      {}
func (*RenewTick) IgnoreDeadLetterLogging() {}
func (*IdleTick) IgnoreDeadLetterLogging()  {}
