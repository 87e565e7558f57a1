package lockactor

import (
	"context"
	"time"

	"github.com/lockactor/lockactor/redisio"
)

// The calls in this file read or delete the lock directly through redisio:
// they change no actor state, so they skip the actor. Each honours its ctx
// even on a hung server (see redisio.Guard).

// query validates the call and runs fn under ctx's deadline, wrapping errors
// with the lock's name.
func query[T any](ctx context.Context, l *Lock, fn func(context.Context, *redisio.Conn) (T, error)) (T, error) {
	var zero T
	if err := l.check(ctx); err != nil {
		return zero, err
	}
	io := l.c.rt.IO()
	v, err := redisio.Guard(ctx, io, func(ctx context.Context) (T, error) { return fn(ctx, io) })
	if err != nil {
		return zero, nameError(l.name, err)
	}
	return v, nil
}

// ForceUnlock deletes the lock whoever holds it and wakes its waiters; true if
// it was locked. The holder finds out at its next renewal (Lost closes).
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	return query(ctx, l, func(ctx context.Context, io *redisio.Conn) (bool, error) {
		return io.ForceUnlock(ctx, l.name)
	})
}

// IsLocked reports whether anyone holds the lock.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	return query(ctx, l, func(ctx context.Context, io *redisio.Conn) (bool, error) {
		return io.Exists(ctx, l.name)
	})
}

// IsHeldByMe reports whether this handle holds the lock.
func (l *Lock) IsHeldByMe(ctx context.Context) (bool, error) {
	n, err := l.HoldCount(ctx)
	return n > 0, err
}

// HoldCount is this handle's reentrant count (0 when it holds nothing).
func (l *Lock) HoldCount(ctx context.Context) (int, error) {
	return query(ctx, l, func(ctx context.Context, io *redisio.Conn) (int, error) {
		return io.HoldCount(ctx, l.name, l.owner)
	})
}

// RemainingLease is the lock key's remaining time to live; 0 when not locked,
// -1 when the key exists without an expiry (set by something other than a lock).
func (l *Lock) RemainingLease(ctx context.Context) (time.Duration, error) {
	return query(ctx, l, func(ctx context.Context, io *redisio.Conn) (time.Duration, error) {
		return io.PTTL(ctx, l.name)
	})
}
