package actors

import (
	"errors"
	"time"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// An Extend re-applies a lease to one owner's hold (holds.go keeps the
// record): a RedLock coordinator's renewal of one node, or a handle's own
// Lock.Extend.

// extend serves a RedLock coordinator's renewal of one node, or a
// handle's Extend: it re-applies m.Lease, and the reply comes back as an
// extended message. A handle may extend only a fixed-lease hold this actor
// records and still counts as held (not lost, lease not run out by the
// local clock, which starts it when the grant was sent: never later than
// Redis); anything else is answered here, without Redis.
func (hb *holdBook) extend(m *messages.Extend, renew renewFunc) {
	k := holdKey{m.Owner, m.Mode}
	var h *hold
	if m.Handle {
		h = hb.holds[k]
		switch {
		case h == nil || h.isLost() || h.expired(hb.b.now):
			m.Answer(messages.ExtendResult{})
			return
		case h.lease == 0:
			m.Answer(messages.ExtendResult{Watchdog: true})
			return
		}
	}
	b := hb.b
	sent := hb.b.now
	var stale func() bool
	if h != nil {
		// An Extend of a hold released before its renewal leaves (it
		// waits behind an outage, say) is not sent: a hold is never renewed
		// after its Unlock.
		stale = h.dropped.Load
	}
	renew(k, m.Lease, stale, func(ok bool, err error) {
		b.post(&extended{m: m, h: h, sent: sent, recv: b.rt.sched.Now(), ok: ok, err: err})
	})
}

// extended is the reply to a renewal that extend sent, posted back to the
// actor.
type extended struct {
	m    *messages.Extend
	h    *hold // a handle's Extend: the hold it extended; nil for a coordinator's
	sent time.Time
	recv time.Time // when the reply came, before it waited in the mailbox
	ok   bool
	err  error
}

// extended keeps the record in step with a coordinator's renewal and
// answers it. It reports whether the hold was found gone (and is now lost).
// A handle's Extend whose reply came back after the hold's deadline loses
// the hold, whatever it says: the hold was over by then (see renewed).
func (hb *holdBook) extended(m *extended) (lost bool) {
	k := holdKey{m.m.Owner, m.m.Mode}
	b := hb.b
	if m.h != nil && errors.Is(m.err, redisio.ErrStale) {
		m.m.Answer(messages.ExtendResult{}) // released before it left: not held
		return false
	}
	b.redisError(OpRenew, m.err)
	switch {
	case m.err != nil:
		b.rt.cfg.Observer.Renewed(b.key, RenewError)
	case m.ok:
		b.rt.cfg.Observer.Renewed(b.key, RenewOK)
	default:
		b.rt.cfg.Observer.Renewed(b.key, RenewGone)
	}
	h := hb.holds[k]
	switch {
	case m.h != nil && h != m.h:
		h = nil // released (and maybe taken again) while the renewal was out
	case h != nil && m.sent.Before(h.confirmed):
		h = nil // a later grant set the lease Redis has now
	}
	ok := m.ok
	if h != nil && m.err == nil {
		if ok && m.h != nil && h.over(m.recv) {
			ok = false // over before the reply came, as renewed judges a renewal's
		}
		if ok {
			h.lease = m.m.Lease
			h.confirm(m.sent, hb.watchdog)
			h.until = hb.b.now.Add(m.m.Lease)
			// A handle's Extend whose reply came back after the new lease,
			// counted from the send, could have run out (a paused server,
			// a slow network): the caller would get none of it, and the
			// hold may be gone. It could not renew in time: lost.
			ok = m.h == nil || !h.expired(hb.b.now)
		}
		if !ok {
			hb.drop(k, h, true)
			lost = true
		}
	}
	m.m.Answer(messages.ExtendResult{OK: ok, Err: m.err})
	return lost
}
