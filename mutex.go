package lockactor

import (
	"context"
	"sync"
	"time"

	"github.com/lockactor/lockactor/actors"
	"github.com/lockactor/lockactor/internal/syncx"
)

// A Mutex is a lock that goroutines share the way they share a sync.Mutex:
// store it once, and any goroutine may Lock it; a Lock while it is held,
// from any goroutine (the holder's own included), waits for its Unlock.
// It is not reentrant. Each acquisition is a new owner in Redis, a fresh
// field of Redisson's lock hash, so Java Redisson clients, *Lock handles
// and other Mutexes of the name (in this process or another) exclude it.
//
// Unlock releases the current hold whichever goroutine calls it, and
// returns ErrNotHeld when nothing is held. Lost, Extend, WithLease and
// WithWait behave as for the current hold of a *Lock. The waiters of one
// Client get the lock straight from the holder's Unlock, as handles of a
// name do (see WithRelay).
//
// As with a sync.Mutex, a hold is the mutex's from its Lock to its Unlock:
// a hold that ends by itself first (Lost closed: found gone, or its lease
// ran out) stays the current one until its Unlock, and a grant that another
// goroutine of this Mutex gets meanwhile waits for that Unlock (a TryLock
// gives it back and reports false; a Lock whose grant lapses while it
// waits gives it back and tries again). So an Unlock never releases a hold
// another goroutine took after the first had lapsed.
//
// Use a *Lock (one handle per owner) for Redisson's per-owner reentrancy;
// use a Mutex where goroutines share the lock.
type Mutex struct {
	c    *Client
	name string
	box  lostBox

	mu     sync.Mutex
	cur    *Lock         // the handle of the current hold; nil when nothing is held
	vacant chan struct{} // closed when the current hold's Unlock comes
}

// Mutex returns a mutex on the lock name that goroutines may share. An
// empty name surfaces as ErrInvalidArgument from its first call.
func (c *Client) Mutex(name string) *Mutex { return &Mutex{c: c, name: name} }

var _ Locker = (*Mutex)(nil)

// Name is the lock's name, the Redis key of its hash.
func (m *Mutex) Name() string { return m.name }

// Lock waits until the mutex is held or ctx ends (then the error matches
// ctx.Err() and nothing is held). WithWait is refused: Lock waits for ctx.
func (m *Mutex) Lock(ctx context.Context, opts ...LockOption) error {
	for {
		l := m.handle()
		if err := l.Lock(ctx, opts...); err != nil {
			return err
		}
		if ok, err := m.take(ctx, l, true); ok || err != nil {
			return err
		}
		// The grant lapsed while it waited for the previous hold's Unlock
		// (its lease ran out, or it was found gone): another attempt.
	}
}

// TryLock makes one attempt, or waits up to WithWait; (false, nil) when the
// mutex was not acquired.
func (m *Mutex) TryLock(ctx context.Context, opts ...LockOption) (bool, error) {
	l := m.handle()
	ok, err := l.TryLock(ctx, opts...)
	if err != nil || !ok {
		return false, err
	}
	return m.take(ctx, l, false)
}

// Unlock releases the current hold, whichever goroutine took it; ErrNotHeld
// when nothing is held. Its other errors are Lock.Unlock's.
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	l := m.cur
	if l != nil {
		m.cur = nil
		m.box.free()
		close(m.vacant)
	}
	m.mu.Unlock()
	if l == nil {
		if err := checkLock(ctx, m.c, kindMutex, m.name); err != nil {
			return err
		}
		return kindMutex.err(m.name, ErrNotHeld)
	}
	return l.Unlock(ctx)
}

// Lost is closed when the current hold ends before its Unlock (see
// Lock.Lost); taken while nothing is held, it is the channel the next
// hold, whichever goroutine takes it, will close.
func (m *Mutex) Lost() <-chan struct{} { return m.box.get() }

// Extend gives the current hold, taken WithLease, lease more from now (see
// Lock.Extend); ErrNotHeld when nothing is held.
func (m *Mutex) Extend(ctx context.Context, lease time.Duration) error {
	m.mu.Lock()
	l := m.cur
	m.mu.Unlock()
	if l == nil {
		l = m.handle() // validates ctx and lease; then holds nothing
	}
	return l.Extend(ctx, lease)
}

// handle is a fresh owner for one acquisition, whose hold closes the
// channel the mutex hands out for its next hold.
func (m *Mutex) handle() *Lock {
	l := m.c.newLock(actors.KindLock, m.name)
	l.mutex = true
	l.box.share(&m.box)
	return l
}

// take makes l's new hold the mutex's current one, once the current one's
// Unlock has come: at once, unless that hold ended by itself and its
// goroutine has not unlocked yet. Meanwhile Lock (wait) waits for that
// Unlock or ctx; TryLock does not. A hold that does not become the
// current one is given back; so is one that lapsed while it waited (a
// torture run handed over a 381 ms lease half a second after its grant):
// then take reports false, and Lock tries again.
func (m *Mutex) take(ctx context.Context, l *Lock, wait bool) (bool, error) {
	for waited := false; ; waited = true {
		m.mu.Lock()
		if m.cur == nil && waited && syncx.Closed(l.box.current()) {
			m.mu.Unlock()
			_ = l.Unlock(ctx)
			return false, nil
		}
		if m.cur == nil {
			m.cur, m.vacant = l, make(chan struct{})
			m.box.held(l.box.current())
			m.mu.Unlock()
			return true, nil
		}
		vacant := m.vacant
		m.mu.Unlock()
		if !wait {
			_ = l.Unlock(ctx)
			return false, nil
		}
		select {
		case <-vacant:
		case <-ctx.Done():
			_ = l.Unlock(ctx)
			return false, kindMutex.err(m.name, ctx.Err())
		}
	}
}
