package actors

import (
	"sync"
	"time"
)

// A release that reached the former master after the sentinels promoted a
// replica is lost with it: the new master still has the hold, and every
// other Client waits until its lease runs out there (a fixed lease of
// minutes, or a watchdog's 30 s). So a runtime that follows a Sentinel
// group remembers, for releasedKeep, which hash fields its releases freed,
// and each re-read after a switch (recheck) asks the new master for those
// too. A field that is there, that no hold of this Client uses and whose
// owner owes no release is a ghost: it is released again (an owed release
// marked ghost, sent with the lock's own release script until its last
// hold goes, so it wakes the waiters as a release does).
//
// Why this cannot free a live hold: the release is queued only when the
// actor's ledger is free (no script of the actor in flight or unsettled),
// and it runs before any acquire the actor sends after it, while the owner
// owes it no acquire is sent for that owner (owedQueue.owes). A grant the
// read raced with has come back by then, and then the field is in use.

// releasedKeep is how long a release is remembered for a switch to check:
// longer than a failover takes from promotion to the runtime's last
// re-read (switchFollowMax bounds the follow; in practice about a second).
const releasedKeep = 15 * time.Second

// releasedBook is a runtime's memory of the hash fields its releases freed
// lately, by lock. Only a runtime that watches a master fills it.
type releasedBook struct {
	mu sync.Mutex
	by map[Key]map[holdKey]time.Time
}

// noteReleased remembers that k's field on key's lock was given up at now
// (holdBook.owe: every release goes through it).
func (rt *Runtime) noteReleased(key Key, k holdKey, now time.Time) {
	if !rt.watches {
		return
	}
	rb := &rt.released
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if rb.by == nil {
		rb.by = make(map[Key]map[holdKey]time.Time)
	}
	m := rb.by[key]
	if m == nil {
		m = make(map[holdKey]time.Time)
		rb.by[key] = m
	}
	m[k] = now
}

// releasedOn lists the fields of key's lock released since cutoff.
func (rt *Runtime) releasedOn(key Key, cutoff time.Time) []holdKey {
	rb := &rt.released
	rb.mu.Lock()
	defer rb.mu.Unlock()
	var ks []holdKey
	for k, at := range rb.by[key] {
		if !at.Before(cutoff) {
			ks = append(ks, k)
		}
	}
	return ks
}

// releasedLocks lists the locks with a release since cutoff, and forgets
// the releases before it.
func (rt *Runtime) releasedLocks(cutoff time.Time) []Key {
	rb := &rt.released
	rb.mu.Lock()
	defer rb.mu.Unlock()
	var keys []Key
	for key, m := range rb.by {
		for k, at := range m {
			if at.Before(cutoff) {
				delete(m, k)
			}
		}
		if len(m) == 0 {
			delete(rb.by, key)
			continue
		}
		keys = append(keys, key)
	}
	return keys
}

// ghost is a hash field the new master still has although this Client
// released it: a candidate for releasing again.
type ghost struct {
	k    holdKey       // the hash field (owner or relayed-from owner) and mode
	left time.Duration // its key's TTL on the new master
}

// inUse reports whether a recorded hold keeps its hold under k's field.
func (hb *holdBook) inUse(k holdKey) bool {
	for hk := range hb.holds {
		if hk.mode == k.mode && hb.fieldOf(hk) == k.owner {
			return true
		}
	}
	return false
}

// ghostsIn keeps the ghosts a re-read found, for the actor to release again
// when its ledger is next free (promoteGhosts).
func (hb *holdBook) ghostsIn(m *holdsRead) {
	if m.err != nil {
		return
	}
	for i, k := range m.released {
		if left := m.releasedLeft[i]; left != 0 && !hb.inUse(k) {
			hb.ghosts = append(hb.ghosts, ghost{k: k, left: left})
		}
	}
}

// promoteGhosts owes a release of every ghost that is still one: no hold
// uses its field and no release of it is owed. The caller's ledger is free
// (see the comment at the top).
func (hb *holdBook) promoteGhosts(q *owedQueue) {
	if len(hb.ghosts) == 0 {
		return // every step asks: keep it to one comparison
	}
	for _, g := range hb.ghosts {
		if hb.inUse(g.k) || q.owes(g.k.owner) {
			continue
		}
		lease := g.left
		if lease <= 0 {
			lease = hb.watchdog // no TTL there: give it the watchdog's
		}
		hb.b.rt.cfg.Logger.Warn(LogReleasedAgain, "lock", hb.b.key.Name, "owner", g.k.owner)
		q.push(&owed{k: g.k, field: g.k.owner, lease: lease, due: hb.b.now, ghost: true})
	}
	clear(hb.ghosts)
	hb.ghosts = hb.ghosts[:0]
}

// LogReleasedAgain is the message of the Warn record logged when a
// release lost in a master switch is sent again; LogReleasedAgainFailed,
// when that failed and is left to the hold's lease. Their attributes are
// lock (the name) and owner (the hash field), and err for the failure.
const (
	LogReleasedAgain       = "lockactor: a release was lost in a master switch; releasing again"
	LogReleasedAgainFailed = "lockactor: releasing again a release lost in a master switch failed; its lease will end the hold"
)

// releasedAgain applies a ghost release's reply: holds left under its field
// (a reentrant count) are released one more time, at once.
func (hb *holdBook) releasedAgain(q *owedQueue, o *owed, left bool) {
	if o.ghost && left {
		o.due = hb.b.now
		q.push(o)
	}
}
