package actors

import (
	"time"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// scheme is what differs between the owner-based locks a lockActor serves:
// which scripts it runs and on which channel it hears releases.
type scheme interface {
	channel(name string) string
	acquire(a *lockActor, m *messages.Acquire, lease time.Duration) (attempt, error)
	release(a *lockActor, m *messages.Release, lease time.Duration) (redisio.UnlockResult, error)
	renew(a *lockActor, k holdKey, lease time.Duration) (bool, error)
	// handoff releases m's hold and, if it was the last, gives the lock to
	// next in the same script; ok is false when the scheme cannot.
	handoff(a *lockActor, m *messages.Release, lease time.Duration, next *messages.Acquire, nextLease time.Duration) (res redisio.UnlockResult, ok bool, err error)
	// exclusive: only one owner holds at a time, so a release message that
	// arrives while a local owner holds is our own and wakes nobody.
	exclusive() bool
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

func (reentrant) acquire(a *lockActor, m *messages.Acquire, lease time.Duration) (attempt, error) {
	ok, ttl, err := a.rt.io.Lock(a.rt.ctx, a.key.Name, m.Owner, lease)
	return attempt{ok: ok, ttl: ttl}, err
}

func (reentrant) release(a *lockActor, m *messages.Release, lease time.Duration) (redisio.UnlockResult, error) {
	return a.rt.io.Unlock(a.rt.ctx, a.key.Name, m.Owner, lease)
}

func (reentrant) renew(a *lockActor, k holdKey, lease time.Duration) (bool, error) {
	return a.rt.io.Renew(a.rt.ctx, a.key.Name, k.owner, lease)
}

func (reentrant) handoff(a *lockActor, m *messages.Release, lease time.Duration, next *messages.Acquire, nextLease time.Duration) (redisio.UnlockResult, bool, error) {
	res, err := a.rt.io.Handoff(a.rt.ctx, a.key.Name, m.Owner, lease, next.Owner, nextLease)
	return res, true, err
}

// fenced is a reentrant lock whose grants from zero holds issue a token.
type fenced struct{ reentrant }

// handoff: a fenced grant must issue a token, which the hand-off script does
// not; fenced locks release and let the next waiter acquire.
func (fenced) handoff(*lockActor, *messages.Release, time.Duration, *messages.Acquire, time.Duration) (redisio.UnlockResult, bool, error) {
	return 0, false, nil
}

func (fenced) acquire(a *lockActor, m *messages.Acquire, lease time.Duration) (attempt, error) {
	ok, ttl, token, err := a.rt.io.FencedLock(a.rt.ctx, a.key.Name, m.Owner, lease)
	return attempt{ok: ok, ttl: ttl, token: token}, err
}

// rw is RedissonReadWriteLock; a hold's mode picks the read or write script.
type rw struct{}

func (rw) channel(name string) string { return redisio.RWChannel(name) }
func (rw) exclusive() bool            { return false }

func (rw) acquire(a *lockActor, m *messages.Acquire, lease time.Duration) (attempt, error) {
	if m.Mode == messages.Read {
		ok, ttl, err := a.rt.io.ReadLock(a.rt.ctx, a.key.Name, m.Owner, lease)
		return attempt{ok: ok, ttl: ttl}, err
	}
	ok, upgrade, ttl, err := a.rt.io.WriteLock(a.rt.ctx, a.key.Name, m.Owner, lease)
	return attempt{ok: ok, ttl: ttl, upgrade: upgrade}, err
}

func (rw) release(a *lockActor, m *messages.Release, lease time.Duration) (redisio.UnlockResult, error) {
	if m.Mode == messages.Read {
		return a.rt.io.ReadUnlock(a.rt.ctx, a.key.Name, m.Owner)
	}
	return a.rt.io.WriteUnlock(a.rt.ctx, a.key.Name, m.Owner, lease)
}

func (rw) handoff(*lockActor, *messages.Release, time.Duration, *messages.Acquire, time.Duration) (redisio.UnlockResult, bool, error) {
	return 0, false, nil
}

func (rw) renew(a *lockActor, k holdKey, lease time.Duration) (bool, error) {
	return a.rt.io.RWRenew(a.rt.ctx, a.key.Name, k.owner, k.mode == messages.Write, lease)
}
