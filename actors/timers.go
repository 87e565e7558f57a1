package actors

import (
	"time"

	"github.com/lockactor/lockactor/redisio"
)

// This file holds the actor's side effects in time and on the subscription:
// the retry timer, the watchdog and the pub/sub handler.

// armRetry wakes the head waiter when the holder's TTL runs out, in case the
// unlock message is lost. A key without expiry (ttl < 0) is retried after a
// watchdog period.
func (a *lockActor) armRetry(ttl time.Duration) {
	switch {
	case ttl < 0:
		ttl = a.rt.cfg.Watchdog
	case ttl < time.Millisecond:
		ttl = time.Millisecond
	}
	if a.retry == nil {
		pid, root := a.self, a.rt.system.Root
		a.retry = time.AfterFunc(ttl, func() { root.Send(pid, wakeTimer) })
		return
	}
	a.retry.Reset(ttl)
}

// armRenew schedules the watchdog unless it is already due.
func (a *lockActor) armRenew(after time.Duration) {
	if a.renewArmed {
		return
	}
	a.renewArmed = true
	after = max(after, time.Millisecond)
	if a.renew == nil {
		pid, root := a.self, a.rt.system.Root
		a.renew = time.AfterFunc(after, func() { root.Send(pid, renewTick) })
		return
	}
	a.renew.Reset(after)
}

// renewHolds is the watchdog: it re-applies the lease of every watchdog hold.
// A renewal that finds the owner's field gone, or no successful renewal before
// the lease would have run out, means the hold is lost. Redis errors are
// retried sooner while lease remains.
func (a *lockActor) renewHolds() {
	a.renewArmed = false
	wd := a.rt.cfg.Watchdog
	next := wd / 3
	for owner, h := range a.holds {
		if h.lease > 0 {
			continue
		}
		if h.isLost() { // the deadline passed while we could not renew
			a.drop(owner, h, true)
			continue
		}
		sent := time.Now()
		ok, err := a.rt.io.Renew(a.rt.ctx, a.key.Name, owner, wd)
		switch {
		case err == nil && ok && !h.isLost():
			h.confirm(sent, wd)
		case err == nil:
			a.drop(owner, h, true)
		case time.Since(h.confirmed) >= wd:
			a.rt.cfg.Logger.Warn("lockactor: renewal failed until the lease ran out", "lock", a.key.Name, "err", err)
			a.drop(owner, h, true)
		default:
			a.rt.cfg.Logger.Debug("lockactor: renewal failed, retrying", "lock", a.key.Name, "err", err)
			next = min(next, wd/10, wd-time.Since(h.confirmed))
		}
	}
	if a.hasWatchdogHolds() {
		a.armRenew(next)
	}
	if !a.heldLocally() {
		a.wake(wakeTimer.Reason) // a lost hold frees the lock for local waiters
	}
}

func (a *lockActor) stopTimers() {
	if a.idleTimer != nil {
		a.idleTimer.Stop()
	}
	if a.retry != nil {
		a.retry.Stop()
	}
	if a.renew != nil {
		a.renew.Stop()
		a.renewArmed = false
	}
}

// subscribe joins the lock's channel; every event becomes a Wake. The
// Subscribed event that confirms it triggers the fresh attempt that covers an
// unlock published before the subscription existed.
func (a *lockActor) subscribe() {
	if a.subID != 0 {
		return
	}
	pid, root := a.self, a.rt.system.Root
	id, err := a.rt.ps.Subscribe(a.rt.ctx, redisio.LockChannel(a.key.Name), func(ev redisio.Event) {
		root.Send(pid, wakeOn[ev.Kind])
	})
	a.subID = id
	if err != nil {
		a.rt.cfg.Logger.Debug("lockactor: subscribe failed; relying on the TTL timer", "lock", a.key.Name, "err", err)
	}
}

func (a *lockActor) unsubscribe() {
	if a.subID == 0 {
		return
	}
	_ = a.rt.ps.Unsubscribe(a.rt.ctx, redisio.LockChannel(a.key.Name), a.subID)
	a.subID = 0
}
