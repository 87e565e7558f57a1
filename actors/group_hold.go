package actors

import (
	"errors"
	"time"

	"github.com/lockactor/lockactor/messages"
)

// The coordinator's side of a hold: its release, and when it may retire
// (a RedLock's renewal is in redlock.go).

// release gives back every member, whether or not it was granted in the
// current hold (a node that never answered may have applied the grant
// late); released decides.
func (a *groupActor) release(m *messages.Release) {
	if a.renew != nil {
		a.renew.Stop()
	}
	a.endHold()
	a.lease, a.held = 0, nil
	a.publishValidity(time.Time{}, 0)
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
		(a.held == nil || (!a.heldUntil.IsZero() && a.now.After(a.heldUntil)))
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
	if a.expire != nil {
		a.expire.Stop()
	}
}
