package actors

import (
	"errors"
	"reflect"
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
// parallel. A majority renewed moves the validity forward; otherwise the
// hold can no longer be guaranteed and every member's Lost closes.
func (a *groupActor) renewRound() {
	if a.lease == 0 || a.held == nil {
		return
	}
	start := time.Now()
	replies := make([]chan messages.ExtendResult, len(a.g.Members))
	for i, mem := range a.g.Members {
		if !a.held[i] {
			continue
		}
		replies[i] = make(chan messages.ExtendResult, 1)
		if err := mem.RT.Send(mem.Key, &messages.Extend{Owner: mem.Owner, Mode: mem.Mode, Lease: a.lease, Reply: replies[i]}); err != nil {
			replies[i] <- messages.ExtendResult{Err: err}
		}
	}
	renewed := 0
	for i, ok := range collect(replies, a.g.NodeTimeout, a.rt.done) {
		if ok {
			renewed++
		} else {
			a.held[i] = false
		}
	}
	if renewed >= a.g.Quorum {
		validity := a.lease - time.Since(start) - drift(a.lease)
		a.g.ValidUntil.Store(int64(start.Add(validity).Sub(Epoch)))
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

// collect waits up to d (or until done closes) for the replies that are not
// nil and reports which renewed; a missing or late answer counts as not
// renewed.
func collect(replies []chan messages.ExtendResult, d time.Duration, done <-chan struct{}) []bool {
	ok := make([]bool, len(replies))
	timer := time.NewTimer(d)
	defer timer.Stop()
	cases := make([]reflect.SelectCase, len(replies)+2)
	waiting := 0
	for i, ch := range replies {
		if ch != nil {
			cases[i] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)}
			waiting++
		}
	}
	cases[len(replies)] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)}
	cases[len(replies)+1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(done)}
	for ; waiting > 0; waiting-- {
		i, v, _ := reflect.Select(cases)
		if i >= len(replies) {
			break
		}
		res := v.Interface().(messages.ExtendResult)
		ok[i] = res.OK && res.Err == nil
		cases[i].Chan = reflect.Value{}
	}
	return ok
}

// release gives back every member, whether or not it was granted in the
// current hold (a node that never answered may have applied the grant late),
// and reports the members that failed. A RedLock succeeds when a majority
// released; a MultiLock when every member did.
func (a *groupActor) release(m *messages.Release) {
	if a.renew != nil {
		a.renew.Stop()
	}
	a.lease, a.held = 0, nil
	a.g.ValidUntil.Store(0)
	n := len(a.g.Members)
	replies := make([]chan messages.ReleaseResult, n)
	for i, mem := range a.g.Members {
		replies[i] = make(chan messages.ReleaseResult, 1)
		if err := mem.RT.Send(mem.Key, &messages.Release{Owner: mem.Owner, Mode: mem.Mode, Reply: replies[i]}); err != nil {
			replies[i] <- messages.ReleaseResult{Err: err}
		}
	}
	released := 0
	var errs []error
	deadline := time.Now().Add(a.g.NodeTimeout)
	for i, ch := range replies {
		res, ok := receiveBy(ch, deadline, a.rt.done)
		switch {
		case !ok:
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
	m.Answer(res)
}

// receiveBy waits for ch until deadline, or until done closes.
func receiveBy(ch chan messages.ReleaseResult, deadline time.Time, done <-chan struct{}) (messages.ReleaseResult, bool) {
	select {
	case res := <-ch:
		return res, true
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case res := <-ch:
		return res, true
	case <-t.C:
		return messages.ReleaseResult{}, false
	case <-done:
		return messages.ReleaseResult{}, false
	}
}

// quiet: nothing pending, and no hold left that has not ended (a
// fixed-lease hold ends with its lease; Unlock after that finds every
// member not held, through a fresh coordinator).
func (a *groupActor) quiet() bool {
	return a.pending == nil && (a.held == nil || (!a.heldUntil.IsZero() && time.Now().After(a.heldUntil)))
}
func (a *groupActor) tidy() {}

func (a *groupActor) shutdown() {
	if a.retry != nil {
		a.retry.Stop()
	}
	if a.renew != nil {
		a.renew.Stop()
	}
}
