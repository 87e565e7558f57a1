package actors

import (
	"time"

	"github.com/lockactor/lockactor/messages"
)

// A RedLock is a group coordinator (group.go) with Group.Redlock set: it
// holds when a majority of its nodes granted and time is left of the
// lease, publishes how long the hold is guaranteed (its validity), and
// renews every node itself. The Redlock algorithm's arithmetic is here, as
// pure functions.

// drift is the clock-drift allowance of a lease: 1% of it plus 2 ms.
func drift(lease time.Duration) time.Duration { return lease/100 + 2*time.Millisecond }

// validity is what a round that took elapsed leaves of lease: the lease,
// less the round's time and the drift allowance. A round that leaves
// nothing (<= 0) has not acquired, even with a majority.
func validity(lease, elapsed time.Duration) time.Duration {
	return lease - elapsed - drift(lease)
}

// validUntil is when a hold whose round started at start stops being
// guaranteed. Every node's lease began no earlier than start, so the hold
// lasts until start + lease - drift: the round's end plus validity(lease,
// elapsed), the round's own time counted once.
func validUntil(start time.Time, lease time.Duration) time.Time {
	return start.Add(lease - drift(lease))
}

// ValidityLeft is what remains at now of a hold published as ns
// nanoseconds after epoch (Group.ValidUntil; 0: not held).
func ValidityLeft(ns int64, now time.Time) time.Duration {
	if ns == 0 {
		return 0
	}
	return max(epoch.Add(time.Duration(ns)).Sub(now), 0)
}

// publishValidity stores the end of the hold whose round started at start
// with lease, for the handle's Validity; a zero start clears it.
func (a *groupActor) publishValidity(start time.Time, lease time.Duration) {
	if start.IsZero() {
		a.g.ValidUntil.Store(0)
		return
	}
	a.g.ValidUntil.Store(int64(validUntil(start, lease).Sub(epoch)))
}

// armRenew schedules the next RedLock renewal round.
func (a *groupActor) armRenew() {
	if a.renew == nil {
		a.renew = a.after(a.lease/3, renewTick)
		return
	}
	a.renew.Reset(a.lease / 3)
}

// renewRound re-applies the lease on every member of the current hold in
// parallel; renewed decides.
func (a *groupActor) renewRound() {
	if a.lease == 0 || a.held == nil {
		return
	}
	r := a.begin(renewing)
	r.ok = make([]bool, len(a.g.Members))
	for i, mem := range a.g.Members {
		if !a.held[i] {
			continue
		}
		reply := a.hook(r, i)
		msg := &messages.Extend{Owner: mem.Owner, Mode: mem.Mode, Lease: a.lease, Then: func(res messages.ExtendResult) { reply(memberAnswered{extended: res}) }}
		a.ask(r, i, msg, func(err error) { msg.Answer(messages.ExtendResult{Err: err}) })
	}
	if r.waiting == 0 {
		a.decide(r, false)
	}
}

// renewed decides a renewal round. A majority renewed moves the validity
// forward; otherwise the hold can no longer be guaranteed and every
// member's Lost closes. A member missing or late counts as not renewed.
func (a *groupActor) renewed(r *round) {
	if a.lease == 0 || a.held == nil {
		return // released while the round was out
	}
	renewed := 0
	for i, ok := range r.ok {
		if ok {
			renewed++
		} else {
			a.held[i] = false
		}
	}
	if renewed >= a.g.Quorum {
		a.publishValidity(r.start, a.lease)
		a.expireAt(validUntil(r.start, a.lease))
		a.armRenew()
		return
	}
	a.loseMajority(renewed)
}

// loseMajority ends a RedLock hold that fewer than a majority still keep:
// every member's Lost closes, and the group's.
func (a *groupActor) loseMajority(left int) {
	a.rt.cfg.Logger.Warn("lockactor: RedLock lost its majority", "lock", a.key.Name, "left", left, "quorum", a.g.Quorum)
	a.publishValidity(time.Time{}, 0)
	for _, mem := range a.g.Members {
		_ = mem.RT.Send(mem.Key, &messages.Lose{Owner: mem.Owner, Mode: mem.Mode})
	}
	a.closeLost()
	a.endHold()
	a.lease, a.held = 0, nil
}
