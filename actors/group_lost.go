package actors

import (
	"time"

	"github.com/lockactor/lockactor/messages"
)

// A group hold's Lost channel. The coordinator closes it when a MultiLock
// loses any member, and when a RedLock keeps fewer than a majority (a
// renewal round, or members found lost) or its validity is spent; never
// after the hold's Unlock began. Members tell the coordinator of their
// losses through the hook each member grant carries (messages.Acquire's
// OnLost), as a memberLost message.

// memberLost is a member's hold lost, for the hold taken by round.
type memberLost struct {
	round uint64
	i     int
}

// validityEnded is a RedLock hold's validity running out (at the end
// armed by expireAt, unless a renewal moved it).
type validityEnded struct{ round uint64 }

// onMemberLost is the hook member i's grant in round carries.
func (a *groupActor) onMemberLost(round uint64, i int) func() {
	post := a.post
	return func() { post(&memberLost{round: round, i: i}) }
}

// newLost is the Lost channel of the hold about to be answered to m: the
// caller's own, if it brought one no other hold claimed.
func (a *groupActor) newLost(m *messages.Acquire) chan struct{} {
	a.lost, a.lostShut = make(chan struct{}), false
	if m.Lost.Claim() {
		a.lost = m.Lost.C
	}
	return a.lost
}

// dropLost gives up the caller's channel: the hold never reached it.
func (a *groupActor) dropLost(m *messages.Acquire) {
	if m.Lost != nil && a.lost == m.Lost.C {
		m.Lost.Unclaim()
	}
	a.lost = nil
}

// closeLost closes the current hold's Lost, once.
func (a *groupActor) closeLost() {
	if a.lost != nil && !a.lostShut {
		a.lostShut = true
		close(a.lost)
	}
}

// endHold forgets the current hold's Lost: from its Unlock on, nothing
// closes it.
func (a *groupActor) endHold() {
	a.lost, a.holdRound = nil, 0
	if a.expire != nil {
		a.expire.Stop()
	}
}

// memberLost applies a member's loss to the hold it belonged to.
func (a *groupActor) memberLost(m *memberLost) {
	if a.held == nil || m.round != a.holdRound || a.holdRound == 0 {
		return // an earlier hold's member, or the hold is over
	}
	if !a.g.Redlock {
		a.closeLost()
		return
	}
	a.held[m.i] = false
	left := 0
	for _, h := range a.held {
		if h {
			left++
		}
	}
	if left < a.g.Quorum {
		a.loseMajority(left)
	}
}

// expireAt arms the end of a RedLock hold's validity.
func (a *groupActor) expireAt(t time.Time) {
	msg := &validityEnded{round: a.holdRound}
	if a.expire != nil {
		a.expire.Stop()
	}
	a.expire = a.after(t.Sub(a.now), msg)
}

// validityEnded closes the hold's Lost if its validity has run out by now
// (a renewal may have moved it since the timer was armed).
func (a *groupActor) validityEnded(m *validityEnded) {
	if a.held == nil || m.round != a.holdRound {
		return
	}
	if ValidityLeft(a.g.ValidUntil.Load(), a.now) <= 0 {
		a.closeLost()
	}
}
