package actors

import (
	"time"

	"github.com/lockactor/lockactor/messages"
)

// A round is the one thing a coordinator has in flight: it has sent one
// message to each member's actor and collects their answers, which come
// back as messages (memberAnswered), until it can decide or its node
// timeout (roundTimeout) passes. Nothing in it blocks: while a round is
// out, the coordinator's mailbox keeps running.

// roundKind says what a round asks of the members.
type roundKind uint8

const (
	acquiring  roundKind = iota // a TryLock on every member
	givingBack                  // releasing the members a failed round took
	renewing                    // a RedLock's lease re-applied on every member held
	releasing                   // Unlock: every member released
)

// round is one fan-out to the members and what has come back of it.
type round struct {
	id       uint64
	kind     roundKind
	start    time.Time
	lease    time.Duration
	timer    timer
	asked    []bool // the member was sent a message in this round
	answered []bool
	waiting  int // asked, not yet answered

	m     *messages.Acquire   // acquiring: the caller's request
	reqs  []*messages.Request // acquiring: the member requests
	parts []messages.Result   // acquiring: each member's answer

	ok      []bool                   // renewing: the member renewed
	results []messages.ReleaseResult // releasing, givingBack
	rel     *messages.Release        // releasing: the caller's Unlock

	then func() // givingBack: what follows once the members are released
}

// memberAnswered carries one member's answer back to its coordinator.
type memberAnswered struct {
	round    uint64
	i        int
	acquired messages.Result
	released messages.ReleaseResult
	extended messages.ExtendResult
}

// roundTimeout tells the coordinator that a round's node timeout passed.
type roundTimeout struct{ round uint64 }

// begin starts a round of kind and arms its node timeout; send then sends
// each member's message (see ask).
func (a *groupActor) begin(kind roundKind) *round {
	a.rounds++
	n := len(a.g.Members)
	r := &round{id: a.rounds, kind: kind, start: a.now, asked: make([]bool, n), answered: make([]bool, n)}
	r.timer = a.after(a.g.NodeTimeout, &roundTimeout{round: r.id})
	a.cur = r
	return r
}

// ask sends msg (built by the caller with a reply hook from hook) to member
// i. A member that cannot be reached counts as answered with err, through
// fail.
func (a *groupActor) ask(r *round, i int, msg any, fail func(err error)) {
	mem := a.g.Members[i]
	r.asked[i] = true
	r.waiting++
	if err := mem.RT.Send(mem.Key, msg); err != nil {
		fail(err)
	}
}

// hook returns the function a member's actor calls with its answer: it
// posts the answer to the coordinator.
func (a *groupActor) hook(r *round, i int) func(memberAnswered) {
	id := r.id
	return func(m memberAnswered) {
		m.round, m.i = id, i
		a.post(&m)
	}
}

// answered applies one member's answer to the current round, and decides
// the round when it can.
func (a *groupActor) answered(m *memberAnswered) {
	r := a.cur
	if r == nil || r.id != m.round || !r.asked[m.i] || r.answered[m.i] {
		return // a late answer of a round already decided
	}
	r.answered[m.i] = true
	r.waiting--
	switch r.kind {
	case acquiring:
		r.parts[m.i] = m.acquired
	case renewing:
		r.ok[m.i] = m.extended.OK && m.extended.Err == nil
	default:
		r.results[m.i] = m.released
	}
	if r.waiting == 0 || (r.kind == acquiring && a.hopeless(r)) {
		a.decide(r, false)
	}
}

// hopeless reports whether an acquiring round can no longer reach its
// quorum, whatever the members still out answer.
func (a *groupActor) hopeless(r *round) bool {
	granted := 0
	for i, p := range r.parts {
		if r.answered[i] && p.Granted {
			granted++
		}
	}
	return granted+r.waiting < a.g.Quorum
}

// timedOut decides the current round with whatever has come back.
func (a *groupActor) timedOut(m *roundTimeout) {
	if r := a.cur; r != nil && r.id == m.round {
		a.decide(r, true)
	}
}

// decide ends round r: the members still out are given up on, the outcome
// applied, and the work the round held back resumes.
func (a *groupActor) decide(r *round, timedOut bool) {
	r.timer.Stop()
	a.cur = nil
	switch r.kind {
	case acquiring:
		a.acquired(r, timedOut)
	case givingBack:
		r.then()
	case renewing:
		a.renewed(r)
	case releasing:
		a.released(r)
	}
	a.resume()
}

// resume runs, in order, the messages and ticks that arrived while a round
// was out, until one starts a round again.
func (a *groupActor) resume() {
	for a.cur == nil && len(a.later) > 0 {
		msg := a.later[0]
		a.later[0] = nil
		a.later = a.later[1:]
		a.handle(msg)
	}
}
