package actors

import (
	"errors"
	"time"

	"github.com/lockactor/lockactor/messages"
)

// The coordinator's side of a hold: renewal of a RedLock and release.

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
		validity := a.lease - time.Since(r.start) - drift(a.lease)
		a.g.ValidUntil.Store(int64(r.start.Add(validity).Sub(Epoch)))
		a.armRenew()
		return
	}
	a.rt.cfg.Logger.Warn("lockactor: RedLock lost its majority", "lock", a.key.Name, "renewed", renewed, "quorum", a.g.Quorum)
	a.g.ValidUntil.Store(0)
	for _, mem := range a.g.Members {
		_ = mem.RT.Send(mem.Key, &messages.Lose{Owner: mem.Owner, Mode: mem.Mode})
	}
	a.lease, a.held = 0, nil
}

// release gives back every member, whether or not it was granted in the
// current hold (a node that never answered may have applied the grant
// late); released decides.
func (a *groupActor) release(m *messages.Release) {
	if a.renew != nil {
		a.renew.Stop()
	}
	a.lease, a.held = 0, nil
	a.g.ValidUntil.Store(0)
	r := a.begin(releasing)
	r.rel, r.results = m, make([]messages.ReleaseResult, len(a.g.Members))
	for i := range a.g.Members {
		a.askRelease(r, i)
	}
}

// released answers an Unlock and reports the members that failed. A
// RedLock succeeds when a majority released; a MultiLock when every member
// did.
func (a *groupActor) released(r *round) {
	released := 0
	var errs []error
	for i, res := range r.results {
		switch {
		case !r.answered[i]:
			errs = append(errs, memberError(a.g.Members[i], errNoAnswer))
		case res.Err != nil:
			errs = append(errs, memberError(a.g.Members[i], res.Err))
		case !res.NotHeld:
			released++
		}
	}
	res := messages.ReleaseResult{}
	if released < a.g.Quorum {
		res.NotHeld = len(errs) == 0
		res.Err = errors.Join(errs...)
	}
	r.rel.Answer(res)
}

// quiet: nothing pending, and no hold left that has not ended (a
// fixed-lease hold ends with its lease; Unlock after that finds every
// member not held, through a fresh coordinator).
func (a *groupActor) quiet() bool {
	return a.cur == nil && len(a.later) == 0 && a.pending == nil &&
		(a.held == nil || (!a.heldUntil.IsZero() && time.Now().After(a.heldUntil)))
}
func (a *groupActor) tidy() {}

func (a *groupActor) shutdown() {
	if a.retry != nil {
		a.retry.Stop()
	}
	if a.cur != nil {
		a.cur.timer.Stop()
	}
	if a.renew != nil {
		a.renew.Stop()
	}
}
