package actors

import (
	"time"

	"github.com/lockactor/lockactor/messages"
)

// scripted is the shape of every actor that changes a lock in Redis (all
// but the group coordinator): base, the ledger of its requests, and one
// message loop. A message is applied (the actor's own handle first, then
// the cases all of them share: the work timer, a pass's continuation, a
// request's reply and a settlement's); then reconcile: the actor runs what
// its state calls for, one script at a time (step), and arms the timers and
// subscriptions that state needs until the next message (settle).
type scripted struct {
	base
	ledger ledger
}

// lockMachine is what an actor adds to the shape.
type lockMachine interface {
	state
	// handle applies msg; false when it is none of the actor's own (the
	// shared cases then take it, or nothing happens).
	handle(msg any) bool
	// step sends the next script due at now; false when nothing is due.
	step(now time.Time) bool
	// settle arms the work timer and the subscriptions for the state
	// left by a pass.
	settle()
}

func (s *scripted) init(rt *Runtime, key Key, e *entry) {
	s.base = base{rt: rt, key: key, entry: e}
	s.ledger = newLedger(&s.base)
}

// run is the actor's message loop (see scripted).
func (s *scripted) run(msg any, m lockMachine) {
	defer s.recoverPanic(msg)
	s.readClock()
	if s.lifecycle(msg, m) {
		return
	}
	if !m.handle(msg) {
		switch r := msg.(type) {
		case *messages.Tick:
			s.tickArrived()
		case *messages.Continue:
		case *replied:
			s.ledger.onReply(r)
		case *resolved:
			s.ledger.onResolved(r)
		default:
			return
		}
	}
	s.steps(m.step)
	m.settle()
}
