package lockactor

import (
	"context"
	"time"
)

// The calls in this file read or delete the lock directly through redisio:
// they change no actor state, so they skip the actor. Each honours its ctx
// even on a hung server (see redisio.Conn.Guard).

// query validates the call and runs fn under ctx's deadline, wrapping errors
// with the lock's name.
func (l *Lock) query(ctx context.Context, fn func(context.Context) error) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	if err := l.c.rt.IO().Guard(ctx, fn); err != nil {
		return nameError(l.name, err)
	}
	return nil
}

// ForceUnlock deletes the lock whoever holds it and wakes its waiters; true if
// it was locked. The holder finds out at its next renewal (Lost closes).
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	var ok bool
	err := l.query(ctx, func(ctx context.Context) (err error) {
		ok, err = l.c.rt.IO().ForceUnlock(ctx, l.name)
		return err
	})
	return ok, err
}

// IsLocked reports whether anyone holds the lock.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	var ok bool
	err := l.query(ctx, func(ctx context.Context) (err error) {
		ok, err = l.c.rt.IO().Exists(ctx, l.name)
		return err
	})
	return ok, err
}

// IsHeldByMe reports whether this handle holds the lock.
func (l *Lock) IsHeldByMe(ctx context.Context) (bool, error) {
	n, err := l.HoldCount(ctx)
	return n > 0, err
}

// HoldCount is this handle's reentrant count (0 when it holds nothing).
func (l *Lock) HoldCount(ctx context.Context) (int, error) {
	var n int
	err := l.query(ctx, func(ctx context.Context) (err error) {
		n, err = l.c.rt.IO().HoldCount(ctx, l.name, l.owner)
		return err
	})
	return n, err
}

// RemainingLease is the lock key's remaining time to live; 0 when not locked,
// -1 when the key exists without an expiry (set by something other than a lock).
func (l *Lock) RemainingLease(ctx context.Context) (time.Duration, error) {
	var d time.Duration
	err := l.query(ctx, func(ctx context.Context) (err error) {
		d, err = l.c.rt.IO().PTTL(ctx, l.name)
		return err
	})
	return d, err
}
