package lockactor

import (
	"context"
	"time"

	"github.com/lockactor/lockactor/actors"
	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// The calls in this file read the lock directly through redisio: they
// change no actor state, so they skip the actor (ForceUnlock, in lock.go,
// goes the same way). Each honours its ctx even on a hung server (see
// guarded).

// query validates the call and runs fn under ctx's deadline (see guarded).
func query[T any](ctx context.Context, l *Lock, fn func(context.Context, *redisio.Conn) (T, error)) (T, error) {
	if err := l.check(ctx); err != nil {
		var zero T
		return zero, err
	}
	return guarded(ctx, l.c, l.what(), l.name, fn)
}

// rwMode is the mode field a ReadWriteLock view owns: "read" or "write".
func (l *Lock) rwMode() string {
	if l.mode == messages.Write {
		return "write"
	}
	return "read"
}

// field is the hash field Redis keeps this handle's current hold under:
// its own, or that of the local owner that relayed the hold to it; and
// whether the handle holds anything, by its own count.
func (l *Lock) field() (string, bool) {
	l.mu.Lock()
	owner, holds := l.owner, l.holds
	if l.relayed != "" {
		owner = l.relayed
	}
	l.mu.Unlock()
	if l.mode == messages.Write {
		return redisio.WriteField(owner), holds > 0
	}
	return owner, holds > 0
}

// IsLocked reports whether anyone holds the lock; for a ReadWriteLock view,
// whether it is held in that view's mode.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	return query(ctx, l, func(ctx context.Context, io *redisio.Conn) (bool, error) {
		if l.key.Kind == actors.KindRW {
			mode, err := io.RWMode(ctx, l.name)
			return mode == l.rwMode(), err
		}
		return io.Exists(ctx, l.name)
	})
}

// IsHeldByMe reports whether this handle holds the lock.
func (l *Lock) IsHeldByMe(ctx context.Context) (bool, error) {
	n, err := l.HoldCount(ctx)
	return n > 0, err
}

// HoldCount is this handle's reentrant count as Redis keeps it: 0 when it
// holds nothing (given up by Unlock, or never held), without asking Redis.
func (l *Lock) HoldCount(ctx context.Context) (int, error) {
	return query(ctx, l, func(ctx context.Context, io *redisio.Conn) (int, error) {
		field, holds := l.field()
		if !holds {
			return 0, nil
		}
		return io.HoldCount(ctx, l.name, field)
	})
}

// RemainingLease is the lock key's remaining time to live; 0 when not locked,
// -1 when the key exists without an expiry (set by something other than a lock).
func (l *Lock) RemainingLease(ctx context.Context) (time.Duration, error) {
	return query(ctx, l, func(ctx context.Context, io *redisio.Conn) (time.Duration, error) {
		return io.PTTL(ctx, l.name)
	})
}

// QueueLength is how many owners, from every client, wait in a fair lock's
// queue in Redis. Other kinds keep their waiters inside each client, not in
// Redis, and report 0.
func (l *Lock) QueueLength(ctx context.Context) (int, error) {
	return query(ctx, l, func(ctx context.Context, io *redisio.Conn) (int, error) {
		if l.key.Kind != actors.KindFair {
			return 0, nil
		}
		return io.FairQueueLen(ctx, l.name)
	})
}

// QueuePosition is this handle's place in a fair lock's queue in Redis, 1
// for the next to be granted; 0 when it is not queued (it holds the lock,
// or does not wait, or the lock is of another kind).
func (l *Lock) QueuePosition(ctx context.Context) (int, error) {
	return query(ctx, l, func(ctx context.Context, io *redisio.Conn) (int, error) {
		if l.key.Kind != actors.KindFair {
			return 0, nil
		}
		return io.FairQueuePosition(ctx, l.name, l.owner)
	})
}
