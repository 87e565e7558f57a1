package actors

import "time"

// The seam between the actors and what runs them. An actor reaches the
// world outside its own state through four things: the clock (read once
// per message, see base.now), its timers, its mailbox (posting to itself,
// stopping), and the store and channels it sends to and listens on
// (store.go). The runtime's implementation is protoactor and the wall
// clock (wall.go); the state machines' unit tests run an actor on the
// test's goroutine under a virtual clock instead, delivering messages
// until none is left and firing timers in the order they fall due.

// clock is the runtime's time.
type clock interface {
	// Now is the time now.
	Now() time.Time
	// AfterFunc calls f once d has passed, on a goroutine of the clock's
	// choosing (the test clock's: the goroutine that advances it).
	AfterFunc(d time.Duration, f func()) timer
}

// timer is an armed AfterFunc; *time.Timer is one.
type timer interface {
	// Stop disarms the timer; false if it had fired or been stopped.
	Stop() bool
	// Reset re-arms the timer to fire d from now.
	Reset(d time.Duration) bool
}

// mailbox delivers messages to one actor, one at a time, in the order
// posted.
type mailbox interface {
	// post queues msg, from any goroutine.
	post(msg any)
	// poison stops the actor once the messages queued before are handled.
	poison()
	// stop stops the actor after the message it is handling, if any.
	stop()
}

// scheduler runs a runtime's actors on its clock.
type scheduler interface {
	clock
	// spawn starts m: it gets a started message first (carrying the
	// mailbox), then every message posted to the mailbox returned, then
	// stopping and stopped once stopped or poisoned.
	spawn(m machine) mailbox
	// shutdown ends the scheduler once every actor has stopped (by
	// deadline).
	shutdown(deadline time.Time)
}

// machine is an actor as a scheduler runs it: one message at a time.
type machine interface {
	receive(msg any)
}

// The lifecycle messages a scheduler sends.
type (
	// started is an actor's first message.
	started struct{ box mailbox }
	// stopping is sent when an actor is stopped or poisoned; no message
	// posted later is delivered.
	stopping struct{}
	// stopped is an actor's last message.
	stopped struct{}
)
