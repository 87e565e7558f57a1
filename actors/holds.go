package actors

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockactor/lockactor/internal/syncx"
	"github.com/lockactor/lockactor/messages"
)

// holdKey names one owner's holds in one view of a lock.
type holdKey struct {
	owner string
	mode  messages.Mode
}

// hold is what an actor knows of one local owner's holds. Redis is the truth;
// this mirror decides whether to renew and which Lost channel to close.
type hold struct {
	count     int
	lease     time.Duration // 0: renewed by the watchdog
	confirmed time.Time     // when the last command that set the lease was sent
	until     time.Time     // the latest Redis may keep it: that command's reply + its lease
	token     uint64        // fencing token of a fenced lock's hold
	// field is the owner whose hash field Redis keeps the hold under when
	// it is not the holder's own: the owner that took the hold in Redis
	// and relayed it (relay.go). Empty: the holder's own.
	field    string
	renewing bool // a renewal is in flight
	// dropped is set when the record forgets the hold (released or lost):
	// a renewal of it still waiting for its pipeline is then not sent, and
	// its deadline closes nothing (set under timeMu: see timeUp).
	dropped  atomic.Bool
	lost     chan struct{} // closed when the hold is found gone
	loseOnce sync.Once
	at       *base // the actor: whom the loss is reported for
	// handed: a grant of the hold went out to its caller (see offer). A
	// hold nobody took (given back at once) closes nothing: its channel may
	// be a caller's, taken before it held (see messages.Acquire.Lost), and
	// belongs to the caller's next hold. Set under timeMu when withdrawn.
	handed atomic.Bool
	// onLose are called once the hold is lost (messages.Acquire.OnLost: a
	// group coordinator hears of its members' losses).
	cbMu   sync.Mutex
	onLose []func()
	// deadline closes lost when the hold's lease would run out with no
	// renewal confirmed (a fixed lease: when it runs out), even while the
	// actor is stuck on a hung server, or when a master switch showed the
	// hold ending sooner (endBy). It runs timeUp, which closes nothing once
	// the hold is dropped.
	deadline timer
	ends     time.Time  // when deadline fires (see loseAt)
	timeMu   sync.Mutex // orders timeUp against drop
	// cap: while a master switch is followed, the latest a renewal may
	// move a watchdog hold's deadline to (zero: none; see endBy).
	cap time.Time
}

// continues reports whether a grant made at at adds to h rather than
// starting a new hold: h is recorded, its lease has not run out and it was
// not found lost.
func (h *hold) continues(at time.Time) bool {
	return h != nil && !h.expired(at) && !h.isLost()
}

// expired reports whether a fixed lease has run out by the local clock.
func (h *hold) expired(now time.Time) bool {
	return h.lease > 0 && now.Sub(h.confirmed) >= h.lease
}

// lose reports the loss and closes the Lost channel, once (reported
// first, so whoever sees Lost closed sees it counted), then runs the
// onLose callbacks; the deadline timer may race the actor.
func (h *hold) lose() {
	h.loseOnce.Do(func() {
		if !h.handed.Load() {
			return // nobody took it: nobody watches it
		}
		h.at.rt.cfg.Observer.Lost(h.at.key)
		close(h.lost)
		h.cbMu.Lock()
		cbs := h.onLose
		h.onLose = nil
		h.cbMu.Unlock()
		for _, f := range cbs {
			f()
		}
	})
}

// whenLost calls f once the hold is lost: later, or at once if it is
// already.
func (h *hold) whenLost(f func()) {
	if f == nil {
		return
	}
	h.cbMu.Lock()
	if !h.isLost() {
		h.onLose = append(h.onLose, f)
		h.cbMu.Unlock()
		return
	}
	h.cbMu.Unlock()
	f()
}

// timeUp is the deadline's function: it closes Lost unless the record
// has dropped the hold (its owner released it, or a loss closed Lost
// already). Stopping the timer at the release is not enough: one that has
// just fired still runs, and would close Lost after Unlock returned nil
// (the torture suite's lost-after-release, seen after a master switch set
// a fixed-lease hold's deadline to its lease's end). drop waits for a
// timeUp in progress, so Lost closes before the release is answered, or
// never; a loss found by a command (gone, lose) still closes it.
func (h *hold) timeUp() {
	h.timeMu.Lock()
	defer h.timeMu.Unlock()
	if !h.dropped.Load() {
		h.lose()
	}
}

// handTo answers the grant m asked for with res, which it completes with
// the hold's Lost, and makes the hold the caller's (offer) and its loss
// the caller's hook's (whenLost); false when the caller had gone (the
// grant is withdrawn: the caller's actor gives the hold back).
func (h *hold) handTo(m *messages.Acquire, res messages.Result) bool {
	first := h.offer()
	res.Granted, res.Lost = true, h.lost
	if !m.Req.Answer(res) {
		h.withdraw(m, first)
		return false
	}
	h.whenLost(m.OnLost)
	return true
}

// offer marks the hold handed to its caller before the grant's answer goes
// out, so that a loss racing the answer closes the caller's Lost; first
// reports whether no earlier grant of the hold had reached its caller.
func (h *hold) offer() (first bool) { return !h.handed.Swap(true) }

// withdraw undoes offer for a grant m whose caller had gone: a hold that
// no grant reached never closes its channel, and gives the caller's back
// for the caller's next hold (unless a loss closed it meanwhile).
func (h *hold) withdraw(m *messages.Acquire, first bool) {
	if !first {
		return // an earlier grant of this hold reached its caller
	}
	h.timeMu.Lock()
	h.handed.Store(false)
	h.timeMu.Unlock()
	if m.Lost != nil && h.lost == m.Lost.C && !syncx.Closed(h.lost) {
		m.Lost.Unclaim()
	}
}

// isLost reports whether the Lost channel is closed.
func (h *hold) isLost() bool { return syncx.Closed(h.lost) }

// confirm records that Redis applied the lease of a command sent at sent, and
// moves the hold's deadline to when that lease runs out: the watchdog's,
// or a fixed lease's own (Lost closes when a fixed lease ends, counted from
// the send: Redis may hold it a little longer, never longer than that
// safely).
func (h *hold) confirm(sent time.Time, watchdog time.Duration) {
	h.confirmed = sent
	lease := watchdog
	if h.lease > 0 {
		lease = h.lease
	}
	end := sent.Add(lease)
	if !h.cap.IsZero() && h.cap.Before(end) {
		end = h.cap
	}
	h.loseAt(end)
}

// over reports whether t is past h's deadline (see loseAt): the hold
// has ended by then, even if the deadline's timer has not run yet.
func (h *hold) over(t time.Time) bool { return !h.ends.IsZero() && t.After(h.ends) }

func (h *hold) stopDeadline() {
	if h.deadline != nil {
		h.deadline.Stop()
	}
}

// holdBook is an actor's record of its local owners' holds and the watchdog
// that renews them. The actor sends renewals on a RenewTick and applies
// their replies as renewed messages; redisio sends a name's scripts in the
// order they were queued, so a renewal sent before a release runs before
// it, and one whose hold was released meanwhile finds its reply ignored.
type holdBook struct {
	holds    map[holdKey]*hold
	timer    timer
	armed    bool
	watchdog time.Duration
	b        *base // the actor: its timers, and whom events are reported for
	// ghosts are fields a re-read after a switch found although this
	// Client released them (ghosts.go).
	ghosts []ghost
}

func newHoldBook(b *base, watchdog time.Duration) holdBook {
	return holdBook{holds: make(map[holdKey]*hold), watchdog: watchdog, b: b}
}

// granted records one more hold for k taken at sent with lease (0: watchdog)
// by b's actor; a grant from zero holds gets a fresh Lost channel: lost,
// the caller's own if it brought one (see messages.Acquire.Lost).
func (hb *holdBook) granted(k holdKey, sent time.Time, lease time.Duration, token uint64, lost *messages.LostChan) *hold {
	h := hb.holds[k]
	if !h.continues(sent) {
		var ch chan struct{}
		if lost.Claim() {
			ch = lost.C
		} else {
			ch = make(chan struct{})
		}
		h = &hold{lost: ch, token: token, at: hb.b}
		hb.holds[k] = h
	}
	h.count++
	h.lease = lease
	h.confirm(sent, hb.watchdog)
	h.until = hb.b.now.Add(hb.leaseOf(lease))
	return h
}

// fieldOf is the owner whose hash field Redis keeps k's holds under: k's
// own, or that of the owner that relayed its hold to k.
func (hb *holdBook) fieldOf(k holdKey) string {
	if h := hb.holds[k]; h != nil && h.field != "" {
		return h.field
	}
	return k.owner
}

// giveUp takes one hold of k off the record as its owner releases it: the
// release counts from now, whatever Redis answers, so a hold is never renewed
// after its Unlock. It returns the hold (nil if none is recorded) and
// whether that was its owner's last.
func (hb *holdBook) giveUp(k holdKey) (h *hold, last bool) {
	h = hb.holds[k]
	if h == nil {
		return nil, false
	}
	h.count--
	if h.count > 0 {
		return h, false
	}
	hb.drop(k, h, false)
	return h, true
}

// gone records that Redis holds nothing for k (an unlock found no hold):
// the hold was lost, and Lost closes.
func (hb *holdBook) gone(k holdKey, h *hold) {
	if hb.holds[k] == h {
		hb.drop(k, h, true)
		return
	}
	h.stopDeadline()
	h.lose()
}

// drop forgets k's holds, closing Lost when they were lost rather than released.
func (hb *holdBook) drop(k holdKey, h *hold, lost bool) {
	if hb.holds[k] != h {
		return
	}
	h.stopDeadline()
	h.timeMu.Lock()
	h.dropped.Store(true)
	h.timeMu.Unlock()
	if lost {
		h.lose()
	}
	delete(hb.holds, k)
	if !hb.renewing() && hb.timer != nil {
		hb.timer.Stop()
		hb.armed = false
	}
}

// held reports whether any local owner holds, by our records.
func (hb *holdBook) held() bool {
	now := hb.b.now
	for _, h := range hb.holds {
		if !h.expired(now) && !h.isLost() {
			return true
		}
	}
	return false
}

// heldFor is how long the live holds (not expired, not lost) can still
// last unless renewed: until the last of their deadlines (see loseAt); 0
// when none is held.
func (hb *holdBook) heldFor() time.Duration {
	var left time.Duration
	for _, h := range hb.holds {
		if !h.expired(hb.b.now) && !h.isLost() {
			left = max(left, h.ends.Sub(hb.b.now))
		}
	}
	return left
}

// renewing reports whether any hold is the watchdog's to renew.
func (hb *holdBook) renewing() bool {
	for _, h := range hb.holds {
		if h.lease == 0 {
			return true
		}
	}
	return false
}

// leaseOf is the lease a hold is taken or re-applied with.
func (hb *holdBook) leaseOf(lease time.Duration) time.Duration {
	if lease > 0 {
		return lease
	}
	return hb.watchdog
}

// leaseFor is the lease to re-apply on a partial release of k.
func (hb *holdBook) leaseFor(k holdKey) time.Duration {
	if h := hb.holds[k]; h != nil && h.lease > 0 {
		return h.lease
	}
	return hb.watchdog
}

// lose closes the Lost channel of m's hold and forgets it.
func (hb *holdBook) lose(m *messages.Lose) {
	k := holdKey{m.Owner, m.Mode}
	if h := hb.holds[k]; h != nil {
		hb.drop(k, h, true)
	}
}

// stop cancels the watchdog. Deadlines keep running: a hold still ends when
// its lease runs out, and Lost says so even after Close.
func (hb *holdBook) stop() {
	if hb.timer != nil {
		hb.timer.Stop()
		hb.armed = false
	}
}

// tidy drops fixed-lease holds whose lease has surely run out in Redis
// (until, not the earlier confirmed + lease: a script that ran late keeps
// its key longer, and an actor that retired too soon would let a later
// Unlock release it as if it had just been held).
func (hb *holdBook) tidy() {
	now := hb.b.now
	for k, h := range hb.holds {
		if h.lease > 0 && !now.Before(h.until) {
			hb.drop(k, h, false)
		}
	}
}

// stale reports whether a grant whose script was sent at sent came back too
// late to hand out: its lease, counted from the send (Redis ran the script
// no earlier), has run out, so Redis may have let the hold go already (a
// reply that waited out a paused server while the key's TTL kept running).
// A grant that comes back with any of its lease left is the caller's.
func stale(now, sent time.Time, lease time.Duration) bool {
	return now.Sub(sent) >= lease
}

// After a grant given back as stale, the next attempt waits a backoff from
// staleMin, doubling while grants keep coming back late, up to staleMax: a
// lease shorter than the round trip to Redis can never be granted, and its
// caller must not send scripts as fast as Redis answers them. A grant that
// comes back in time starts the backoff over.
const (
	staleMin = time.Millisecond
	staleMax = 128 * time.Millisecond
)

// lateGate holds attempts back after grants given back as stale (see
// staleMin): none is made before until.
type lateGate struct {
	wait  backoff
	until time.Time
}

// tooLate closes the gate for the next backoff after a stale grant, and
// returns when it opens.
func (g *lateGate) tooLate(now time.Time) time.Time {
	g.until = now.Add(g.wait.next(staleMin, staleMax))
	return g.until
}

// inTime starts the backoff over: a grant came back in time.
func (g *lateGate) inTime() { g.wait.reset() }

// shut reports whether attempts are held back at now.
func (g *lateGate) shut(now time.Time) bool { return now.Before(g.until) }
