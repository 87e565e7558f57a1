package actors

import "time"

// The watchdog: a hold book renews its watchdog holds every third of the
// watchdog timeout, and applies each renewal's reply.

// arm schedules the watchdog on the actor's mailbox unless it is already due. A
// regular period (after == watchdog/3) ends on a boundary shared by every
// actor of the process, so renewals of many locks fire together and go out as
// one pipeline (redisio's batcher); the first renewal comes no later than a
// period after the grant.
func (hb *holdBook) arm(after time.Duration) {
	if hb.armed {
		return
	}
	hb.armed = true
	if period := hb.watchdog / 3; after == period && period > 0 {
		since := hb.b.now.Sub(epoch)
		after = period - since%period
	}
	if hb.timer == nil {
		hb.timer = hb.b.after(after, renewTick)
		return
	}
	hb.timer.Reset(max(after, time.Millisecond))
}

// renewAll is the watchdog: it sends a renewal of every watchdog hold that
// has none in flight (renewed applies their replies), and arms the next
// period. It reports whether a hold was found lost: its deadline passed
// while no renewal came back.
func (hb *holdBook) renewAll(renew renewFunc) (lostAny bool) {
	b := hb.b
	hb.armed = false
	for k, h := range hb.holds {
		if h.lease > 0 || h.renewing {
			continue
		}
		if h.isLost() || h.over(hb.b.now) { // the deadline passed while we could not renew
			hb.drop(k, h, true)
			lostAny = true
			continue
		}
		h.renewing = true
		sent := hb.b.now
		renew(k, hb.watchdog, h.dropped.Load, func(ok bool, err error) {
			b.post(&renewed{k: k, h: h, sent: sent, recv: b.rt.sched.Now(), ok: ok, err: err})
		})
	}
	if hb.renewing() {
		hb.arm(hb.watchdog / 3)
	}
	return lostAny
}

// renewed is a watchdog renewal's reply, posted back to the actor.
type renewed struct {
	k    holdKey
	h    *hold
	sent time.Time
	recv time.Time // when the reply came, before it waited in the mailbox
	ok   bool
	err  error
}

// renewed applies a renewal's reply. A renewal that finds the field gone,
// or no successful renewal before the lease would have run out, loses the
// hold; so does a success that came back after the hold's deadline: the
// hold was over by then, whether or not the deadline's timer had fired (a
// stalled process fires it late). Redis errors are retried sooner while
// lease remains. It reports whether the hold was lost.
func (hb *holdBook) renewed(m *renewed) (lost bool) {
	b := hb.b
	m.h.renewing = false
	if hb.holds[m.k] != m.h {
		// Relayed meanwhile (relay.go): the reply speaks for the hold that
		// carries on its hash field.
		m.k, m.h = hb.successor(m.k, m.h)
	}
	h := m.h
	if h == nil || h.lease > 0 {
		return false // released, lost or given a fixed lease meanwhile
	}
	obs := b.rt.cfg.Observer
	b.redisError(OpRenew, m.err)
	switch {
	case m.err == nil && m.ok && !h.isLost() && !h.over(m.recv):
		obs.Renewed(b.key, RenewOK)
		if !m.sent.Before(h.confirmed) { // a successor may have a later one
			h.confirm(m.sent, hb.watchdog)
			h.until = hb.b.now.Add(hb.watchdog)
		}
	case m.err == nil || h.over(m.recv) || hb.b.now.Sub(h.confirmed) >= hb.watchdog:
		obs.Renewed(b.key, renewOutcome(m.err))
		b.rt.cfg.Logger.Warn("lockactor: lock lost", "lock", b.key.Name, "owner", m.k.owner, "err", m.err)
		hb.drop(m.k, h, true)
		return true
	default:
		obs.Renewed(b.key, RenewError)
		b.rt.cfg.Logger.Debug("lockactor: renewal failed, retrying", "lock", b.key.Name, "err", m.err)
		hb.soon(min(hb.watchdog/10, hb.watchdog-hb.b.now.Sub(h.confirmed)))
	}
	return false
}

// successor is the hold that carries on h's hash field in Redis after h
// was relayed, and its key; nil if none is recorded. A field stays held
// in Redis from one relay to the next, so what a renewal of h found holds
// for it.
func (hb *holdBook) successor(k holdKey, h *hold) (holdKey, *hold) {
	field := h.field
	if field == "" {
		field = k.owner
	}
	for k2, h2 := range hb.holds {
		if h2 != h && k2.mode == k.mode && h2.field == field {
			return k2, h2
		}
	}
	return k, nil
}

// renewOutcome classifies a renewal that lost its hold: the hold was gone,
// or Redis failed until the lease ran out.
func renewOutcome(err error) RenewOutcome {
	if err != nil {
		return RenewError
	}
	return RenewGone
}

// soon brings the watchdog's next tick forward to d from now.
func (hb *holdBook) soon(d time.Duration) {
	if hb.timer != nil {
		hb.timer.Stop()
	}
	hb.armed = false
	hb.arm(d)
}

// renewFunc sends a renewal of k's hold with lease to Redis; then receives
// false when the hold is gone. then runs on another goroutine, or at once
// when the renewal could not be sent.
type renewFunc func(k holdKey, lease time.Duration, stale func() bool, then func(bool, error))

// renewAfter is when a watchdog hold granted by a script sent at sent is
// first renewed: on the shared period boundary (see arm), or at once when
// a slow reply has already used up a third of the lease.
func renewAfter(now, sent time.Time, watchdog time.Duration) time.Duration {
	if now.Sub(sent) >= watchdog/3 {
		return time.Millisecond
	}
	return watchdog / 3
}
