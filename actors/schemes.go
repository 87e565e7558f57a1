package actors

import (
	"errors"
	"time"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// scheme is what differs between the owner-based locks a lockActor serves:
// which scripts it runs and on which channel it hears releases.
type scheme interface {
	channel(name string) string
	// acquire sends m's acquire script; read interprets its reply.
	acquire(a *lockActor, op redisio.Op, m *messages.Acquire, lease time.Duration) redisio.Reply
	read(m *messages.Acquire, r redisio.Reply) (attempt, error)
	// release frees one hold of k; noted: with the note that tells other
	// lockactor Clients it was ours (redisio.UnlockNoted, see yield.go).
	release(a *lockActor, op redisio.Op, k holdKey, lease time.Duration, noted bool) redisio.Reply
	renew(a *lockActor, k holdKey, lease time.Duration, stale func() bool, then func(bool, error))
	// handsOff reports whether a release can give the lock straight to the
	// next local waiter (handoff.lua); handoff sends that script.
	handsOff() bool
	handoff(a *lockActor, op redisio.Op, k holdKey, lease time.Duration, next *messages.Acquire, nextLease time.Duration) redisio.Reply
	// exclusive: only one owner holds at a time, so a release message that
	// arrives while a local owner holds is our own and wakes nobody.
	exclusive() bool
	// fences: grants carry fencing tokens, which must never go back for
	// the Client (tokenMemory, lockActor.tokenBehind).
	fences() bool
}

// attempt is one acquire script's answer.
type attempt struct {
	ok      bool
	ttl     time.Duration // refused: the holder's remaining lease
	token   uint64        // granted by a fenced lock
	upgrade bool          // refused: read holder asking for the write lock
}

// reentrant is RedissonLock.
type reentrant struct{}

func (reentrant) channel(name string) string { return redisio.LockChannel(name) }
func (reentrant) exclusive() bool            { return true }
func (reentrant) handsOff() bool             { return true }
func (reentrant) fences() bool               { return false }

func (reentrant) acquire(a *lockActor, op redisio.Op, m *messages.Acquire, lease time.Duration) redisio.Reply {
	return a.rt.io.Lock(a.rt.ctx, op, a.key.Name, a.fieldFor(m.Owner), lease)
}

func (reentrant) read(_ *messages.Acquire, r redisio.Reply) (attempt, error) {
	ok, ttl, err := r.Acquire()
	return attempt{ok: ok, ttl: ttl}, err
}

func (reentrant) release(a *lockActor, op redisio.Op, k holdKey, lease time.Duration, noted bool) redisio.Reply {
	if !a.spin.publishes() {
		return a.rt.io.UnlockQuiet(a.rt.ctx, op, a.key.Name, k.owner, lease)
	}
	if noted {
		return a.rt.io.UnlockNoted(a.rt.ctx, op, a.key.Name, k.owner, lease, a.foreign.note(a.now))
	}
	return a.rt.io.Unlock(a.rt.ctx, op, a.key.Name, k.owner, lease)
}

func (reentrant) renew(a *lockActor, k holdKey, lease time.Duration, stale func() bool, then func(bool, error)) {
	a.rt.io.Renew(a.rt.ctx, a.key.Name, k.owner, lease, stale, then)
}

func (reentrant) handoff(a *lockActor, op redisio.Op, k holdKey, lease time.Duration, next *messages.Acquire, nextLease time.Duration) redisio.Reply {
	return a.rt.io.Handoff(a.rt.ctx, op, a.key.Name, k.owner, lease, next.Owner, nextLease)
}

// fenced is a reentrant lock whose grants from zero holds issue a token. It
// does not hand off: a fenced grant must issue a token, which the hand-off
// script does not; fenced locks release and let the next waiter acquire.
// Each acquire names a floor its token must rise above (tokenFloor).
type fenced struct{ reentrant }

func (fenced) handsOff() bool { return false }
func (fenced) fences() bool   { return true }

func (fenced) acquire(a *lockActor, op redisio.Op, m *messages.Acquire, lease time.Duration) redisio.Reply {
	floor, fresh := a.tokenFloor(m.Owner, a.now)
	return a.rt.io.FencedLock(a.rt.ctx, op, a.key.Name, a.fieldFor(m.Owner), lease, floor, fresh)
}

func (fenced) read(_ *messages.Acquire, r redisio.Reply) (attempt, error) {
	ok, ttl, token, err := r.Fenced()
	return attempt{ok: ok, ttl: ttl, token: token}, err
}

// rw is RedissonReadWriteLock; a hold's mode picks the read or write script.
type rw struct{}

func (rw) channel(name string) string { return redisio.RWChannel(name) }
func (rw) exclusive() bool            { return false }
func (rw) handsOff() bool             { return false }
func (rw) fences() bool               { return false }

func (rw) acquire(a *lockActor, op redisio.Op, m *messages.Acquire, lease time.Duration) redisio.Reply {
	if m.Mode == messages.Read {
		return a.rt.io.ReadLock(a.rt.ctx, op, a.key.Name, m.Owner, lease)
	}
	return a.rt.io.WriteLock(a.rt.ctx, op, a.key.Name, m.Owner, lease)
}

func (rw) read(m *messages.Acquire, r redisio.Reply) (attempt, error) {
	if m.Mode == messages.Read {
		ok, ttl, err := r.Acquire()
		return attempt{ok: ok, ttl: ttl}, err
	}
	ok, upgrade, ttl, err := r.Write()
	return attempt{ok: ok, ttl: ttl, upgrade: upgrade}, err
}

func (rw) release(a *lockActor, op redisio.Op, k holdKey, lease time.Duration, _ bool) redisio.Reply {
	if k.mode == messages.Read {
		return a.rt.io.ReadUnlock(a.rt.ctx, op, a.key.Name, k.owner)
	}
	return a.rt.io.WriteUnlock(a.rt.ctx, op, a.key.Name, k.owner, lease)
}

func (rw) handoff(*lockActor, redisio.Op, holdKey, time.Duration, *messages.Acquire, time.Duration) redisio.Reply {
	return redisio.Reply{Err: errNoHandoff}
}

var errNoHandoff = errors.New("read-write locks do not hand off")

func (rw) renew(a *lockActor, k holdKey, lease time.Duration, stale func() bool, then func(bool, error)) {
	a.rt.io.RWRenew(a.rt.ctx, a.key.Name, k.owner, k.mode == messages.Write, lease, stale, then)
}
