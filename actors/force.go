package actors

import (
	"sync"
	"sync/atomic"
	"time"
)

// A force unlock deletes a lock whoever holds it. The local owners of a
// hold learn of it from the release message it publishes; a relay
// (relay.go) trusts that message to come in time. For a force unlock made
// by this Client it need not trust the channel: the Client knows when the
// command was sent and when its reply came. A torture run whose pub/sub
// reads came 26 ms late relayed a hold twice after a ForceUnlock of the
// same Client had returned, the message still on its way.
//
// So every force unlock of the Client is recorded here, by name, from just
// before its command is sent until it has finished: while one is under
// way no hold of the name is relayed, and afterwards only a hold Redis
// confirmed after it ended (a renewal or a grant sent later).

// forceBook records the Client's force unlocks by name: those under way,
// and when the last one ended.
type forceBook struct {
	mu    sync.Mutex
	names map[string]*forcing
	size  atomic.Int64 // len(names): relays skip the lock while it is 0
}

// forcing is one name's force unlocks.
type forcing struct {
	under int       // force unlocks of the name under way
	ended time.Time // when the last one finished
}

// Forcing records that a force unlock of name is about to be sent (a Lock,
// FairLock or ReadWriteLock view of name: they share its hash); call done
// once the command has finished, with its error. Until then no hold of
// name is relayed, and after it only holds Redis confirmed later. A
// command that failed may still run on the server (a stalled server
// reads it later), so after a failure holds are trusted again only once
// confirmed half a watchdog after it.
func (rt *Runtime) Forcing(name string) (done func(err error)) {
	b := &rt.forced
	now := rt.sched.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.names == nil {
		b.names = make(map[string]*forcing)
	}
	f := b.names[name]
	if f == nil {
		f = &forcing{}
		b.names[name] = f
	}
	f.under++
	b.prune(now.Add(-rt.cfg.Watchdog)) // keeps f: it is under way
	var once sync.Once
	return func(err error) {
		once.Do(func() {
			end := rt.sched.Now()
			if err != nil {
				end = end.Add(rt.cfg.Watchdog / 2)
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			f.under--
			if end.After(f.ended) {
				f.ended = end
			}
		})
	}
}

// prune forgets the names with no force unlock under way whose last one
// ended before cutoff: no hold confirmed that long ago is relayed anyway
// (relays need a confirmation younger than half a watchdog).
func (b *forceBook) prune(cutoff time.Time) {
	for name, f := range b.names {
		if f.under == 0 && f.ended.Before(cutoff) {
			delete(b.names, name)
		}
	}
	b.size.Store(int64(len(b.names)))
}

// allows reports whether a hold of name that Redis confirmed at confirmed
// may be relayed, as far as the Client's force unlocks go: none of name is
// under way, and the last one ended before confirmed.
func (b *forceBook) allows(name string, confirmed time.Time) bool {
	if b.size.Load() == 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.names[name]
	return f == nil || f.under == 0 && confirmed.After(f.ended)
}
