package actors

import (
	"strings"
	"time"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// A master switch is news (Sentinel). Writes that reached the former master
// after the sentinels promoted a replica can be gone on the new one, even
// when a replica confirmed them: Sentinel re-points that replica, and it
// copies the new master afresh. So a runtime whose client follows a
// Sentinel group's master watches which server the sentinels name while it
// has lock actors. When that changes, every owner-based lock actor reads
// its holds on the new master, over a connection of its own (the client's
// pool may still reach the former master until go-redis hears
// +switch-master):
//
//   - a hold that is missing there is lost: Lost closes, fixed-lease holds
//     included;
//   - a hold that is there ends, as far as the runtime promises, when its
//     key expires there: renewals that land on the former master meanwhile
//     extend nothing;
//   - waiters try again at once, and a fair actor takes out of the new
//     master's queue the owners of this Client it no longer waits for.
//
// The reads repeat every switchCheckEvery until the client's pool is seen
// on the new master, once more after that, so that a grant or renewal sent
// to the former master in the meantime is caught too.

// switchCheckEvery is how often the runtime asks which server is master,
// and re-reads its holds while it follows a switch.
const switchCheckEvery = 250 * time.Millisecond

// While a failover is under way (a sentinel announced a step of one), the
// runtime asks every switchCheckFast instead, for switchFastFor. It does
// not follow the master a sentinel's +promoted-slave names before the
// sentinels answer with it: following ahead of go-redis's pool (which
// moves on +switch-master) capped a graceful failover's holds at their
// copy's TTL on the new master, and a 3 s watchdog hold's Lost closed
// (TestSentinelGracefulFailoverKeepsLocks, once in CI): renewals still
// went to the former master. A +switch-master is followed at once, with
// the Conn's commands, renewals included, sent to the new master until
// the pool gets there (master_watch.go). See redisio.WatchSentinels.
const (
	switchCheckFast = 10 * time.Millisecond
	switchFastFor   = 10 * time.Second
)

// switchFollowMax bounds how long the runtime re-reads holds after a
// switch while its client's pool has not been seen on the new master.
const switchFollowMax = time.Minute

// fairRecent is how long a fair lock name is remembered after its actor
// last had a waiter or a cancel: a switch within it makes the name's queue
// be checked even if its actor has retired since.
const fairRecent = 30 * time.Second

// switched tells an actor which server is master now, after a switch: it
// re-reads its holds (and a fair actor its queue) there. final: the
// client's pool reaches that server too, and this is the last read.
type switched struct {
	server string
	final  bool
}

// holdsRead is what the new master said of an actor's holds.
type holdsRead struct {
	keys  []holdKey
	holds []*hold
	left  []time.Duration // per hold: TTL left; 0: missing; -1: no TTL
	// released are fields this Client released lately (ghosts.go), and
	// releasedLeft what the new master has of each, as left.
	released     []holdKey
	releasedLeft []time.Duration
	sent, recv   time.Time
	final        bool
	err          error
}

// queueRead is a fair lock's queue as the new master has it.
type queueRead struct {
	owners []string
	err    error
}

// broadcast sends m to every owner-based lock actor, and to the fair
// actors of names recently used (spawning them: a ghost in the queue of a
// name whose actor retired is found too).
func (rt *Runtime) broadcast(m *switched) {
	rt.locks.Range(func(k, v any) bool {
		key, e := k.(Key), v.(*entry)
		if followsSwitch(key.Kind) && e.pin() {
			e.box.post(m)
			e.unpin()
		}
		return true
	})
	rt.fairSeen.Range(func(k, _ any) bool {
		key := Key{Kind: KindFair, Name: k.(string)}
		if _, live := rt.locks.Load(key); !live {
			_ = rt.Send(key, m)
		}
		return true
	})
	// A lock released lately whose actor has retired since: its release
	// may be among the lost (ghosts.go).
	for _, key := range rt.releasedLocks(rt.sched.Now().Add(-releasedKeep)) {
		if _, live := rt.locks.Load(key); !live {
			_ = rt.Send(key, m)
		}
	}
}

// followsSwitch reports whether actors of kind keep holds a switch can
// take: the owner-based locks.
func followsSwitch(k Kind) bool {
	switch k {
	case KindLock, KindFenced, KindRW, KindSpin, KindFair:
		return true
	}
	return false
}

// sawFair notes that name's fair actor has waiters or cancels, for a
// switch soon after (broadcast). Only a runtime that watches does.
func (rt *Runtime) sawFair(name string) {
	if !rt.watches {
		return
	}
	now := rt.sched.Now().UnixNano()
	if v, ok := rt.fairSeen.Load(name); ok && now-v.(int64) < int64(time.Second) {
		return
	}
	rt.fairSeen.Store(name, now)
}

// forgetFair drops the names sawFair noted before cutoff.
func (rt *Runtime) forgetFair(cutoff time.Time) {
	rt.fairSeen.Range(func(k, v any) bool {
		if v.(int64) < cutoff.UnixNano() {
			rt.fairSeen.Delete(k)
		}
		return true
	})
}

// recheck reads every hold of the book on m's server, and the fields this
// Client released lately that no hold uses (ghosts.go); the answer comes
// back as a holdsRead.
func (hb *holdBook) recheck(m *switched) {
	b := hb.b
	if b.rt.conn == nil {
		return
	}
	r := &holdsRead{final: m.final, sent: b.now}
	fields := make([]string, 0, len(hb.holds))
	for k, h := range hb.holds {
		r.keys, r.holds = append(r.keys, k), append(r.holds, h)
		fields = append(fields, holdField(holdKey{hb.fieldOf(k), k.mode}))
	}
	for _, k := range b.rt.releasedOn(b.key, b.now.Add(-releasedKeep)) {
		if !hb.inUse(k) {
			r.released = append(r.released, k)
			fields = append(fields, holdField(k))
		}
	}
	if len(fields) == 0 {
		return
	}
	b.rt.conn.HoldsOnThen(b.rt.ctx, m.server, b.key.Name, fields, func(left []time.Duration, err error) {
		r.err, r.recv = err, b.rt.sched.Now()
		if err == nil {
			r.left, r.releasedLeft = left[:len(r.keys)], left[len(r.keys):]
		}
		b.post(r)
	})
}

// reread applies what the new master said of the holds: a missing hold is
// lost; one that is there ends no later than its key does there. It
// reports whether a hold was lost. A failed read changes nothing: the next
// round reads again.
func (hb *holdBook) reread(m *holdsRead) (lostAny bool) {
	b := hb.b
	if m.err != nil {
		b.rt.cfg.Logger.Debug("lockactor: reading holds on the new master failed", "lock", b.key.Name, "err", m.err)
		return false
	}
	for i, k := range m.keys {
		h := m.holds[i]
		if hb.holds[k] != h {
			continue // released or replaced meanwhile
		}
		switch left := m.left[i]; {
		case left == 0:
			b.rt.cfg.Logger.Warn("lockactor: lock lost in a master switch", "lock", b.key.Name, "owner", k.owner)
			hb.drop(k, h, true)
			lostAny = true
		case left > 0:
			h.endBy(m.sent.Add(left), m.recv.Add(left), m.final, hb.watchdog)
		}
	}
	return lostAny
}

// endBy applies the new master's word that h's key expires between low
// and high. A watchdog hold's deadline becomes the sooner of low and its
// last confirmed renewal's end, later as well as sooner (an earlier read,
// delayed by a paused server, may have set it too soon), and until the
// last read (final) no renewal moves it past low: one that landed on the
// former master counts for nothing. A fixed-lease hold whose key surely
// expires before its lease would have ended loses at low.
func (h *hold) endBy(low, high time.Time, final bool, watchdog time.Duration) {
	if h.lease > 0 {
		if high.Before(h.confirmed.Add(h.lease)) {
			h.loseAt(low)
		}
		return
	}
	h.cap = time.Time{}
	if !final {
		h.cap = low
	}
	h.loseAt(earliest(low, h.confirmed.Add(watchdog)))
}

// earliest is the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// loseAt arms h's deadline to close Lost at t.
func (h *hold) loseAt(t time.Time) {
	h.ends = t
	d := t.Sub(h.at.now)
	if h.deadline == nil {
		h.deadline = h.at.rt.sched.AfterFunc(d, h.timeUp)
		return
	}
	h.deadline.Reset(d)
}

// holdField is the hash field of k's holds: the owner (for a relayed
// hold, the one it was relayed from: see holdBook.fieldOf), or its write
// field (a read-write lock's write view).
func holdField(k holdKey) string {
	if k.mode == messages.Write {
		return redisio.WriteField(k.owner)
	}
	return k.owner
}

// switched re-reads the holds after a switch and lets the waiters try at
// once: the holder they waited for may have been lost with it.
func (a *lockActor) switched(m *switched) {
	a.recheck(m)
	if a.waiters.len() > 0 {
		a.forgetVerdict()
	}
}

// switched re-reads the holds and the queue after a switch, and lets the
// waiters try at once (an owner missing from the new master's queue joins
// it again with its attempt).
func (a *fairActor) switched(m *switched) {
	a.recheck(m)
	for _, w := range a.arrived {
		w.due = time.Time{}
	}
	if a.rt.conn == nil {
		return
	}
	b := &a.base
	a.rt.conn.QueuedOnThen(a.rt.ctx, m.server, a.key.Name, func(owners []string, err error) {
		b.post(&queueRead{owners: owners, err: err})
	})
}

// queueRead cancels the owners of this Client in the new master's queue
// that it no longer waits for: their cancels may have reached the former
// master only.
func (a *fairActor) queueRead(m *queueRead) {
	if m.err != nil {
		a.rt.cfg.Logger.Debug("lockactor: reading a fair queue on the new master failed", "lock", a.key.Name, "err", m.err)
		return
	}
	mine := a.rt.cfg.ClientID + ":"
	for _, owner := range m.owners {
		if !strings.HasPrefix(owner, mine) || a.waiting[owner] != nil || a.cancelOwed(owner) {
			continue
		}
		if _, holds := a.holds[holdKey{owner, messages.Exclusive}]; holds {
			continue
		}
		a.cancels = append(a.cancels, &fairCancel{owner: owner, w: a.rt.cfg.FairWait, due: a.now})
	}
}

// cancelOwed reports whether a cancel of owner is queued.
func (a *fairActor) cancelOwed(owner string) bool {
	for _, c := range a.cancels {
		if c.owner == owner {
			return true
		}
	}
	return false
}
