package redisio

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/scripts"
)

// Conn runs lock commands on the user's go-redis client.
type Conn struct {
	rdb     redis.UniversalClient
	publish string // "publish", or "spublish" on a sharded cluster

	// calls counts guarded commands still running after their caller left;
	// Close waits for them so no goroutine outlives the Client.
	calls sync.WaitGroup
}

// NewConn wraps rdb. It does not take ownership: closing rdb is the caller's.
func NewConn(rdb redis.UniversalClient) *Conn {
	return &Conn{rdb: rdb, publish: "publish"}
}

// Wait blocks until every guarded command that outlived its caller has ended.
func (c *Conn) Wait() { c.calls.Wait() }

// Guard runs fn on c and returns when fn does or when ctx ends, whichever
// comes first. go-redis ignores ctx deadlines on socket reads unless the user
// enabled ContextTimeoutEnabled, so a hung server would otherwise hold the
// caller for the client's whole read timeout. A command abandoned this way
// still finishes in the background (its result is dropped); c.Wait waits for
// it.
func Guard[T any](ctx context.Context, c *Conn, fn func(context.Context) (T, error)) (T, error) {
	if ctx.Done() == nil {
		return fn(ctx)
	}
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	c.calls.Add(1)
	go func() {
		defer c.calls.Done()
		v, err := fn(context.WithoutCancel(ctx))
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// ms renders a duration as the whole milliseconds Redis expects, at least 1.
func ms(d time.Duration) string {
	n := d.Milliseconds()
	if n < 1 {
		n = 1
	}
	return strconv.FormatInt(n, 10)
}

// Lock runs lock.lua: granted, or the holder's remaining time to live
// (negative when the key exists without an expiry).
func (c *Conn) Lock(ctx context.Context, name, owner string, lease time.Duration) (granted bool, ttl time.Duration, err error) {
	n, err := scripts.Lock.Run(ctx, c.rdb, []string{name}, ms(lease), owner).Int64()
	if errors.Is(err, redis.Nil) {
		return true, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	return false, time.Duration(n) * time.Millisecond, nil
}

// UnlockResult is what one release did.
type UnlockResult int

// The outcomes of unlock.lua.
const (
	NotHeld   UnlockResult = iota // the owner held nothing; nothing changed
	StillHeld                     // one hold released, others remain
	Released                      // last hold released, waiters told
)

// Unlock runs unlock.lua for one hold of owner.
func (c *Conn) Unlock(ctx context.Context, name, owner string, lease time.Duration) (UnlockResult, error) {
	keys := []string{name, LockChannel(name)}
	n, err := scripts.Unlock.Run(ctx, c.rdb, keys, UnlockMessage, ms(lease), owner, c.publish).Int64()
	switch {
	case errors.Is(err, redis.Nil):
		return NotHeld, nil
	case err != nil:
		return NotHeld, err
	case n == 1:
		return Released, nil
	default:
		return StillHeld, nil
	}
}

// Renew re-applies lease while owner still holds the lock; false when it does not.
func (c *Conn) Renew(ctx context.Context, name, owner string, lease time.Duration) (bool, error) {
	n, err := scripts.Renew.Run(ctx, c.rdb, []string{name}, ms(lease), owner).Int64()
	return n == 1, err
}

// ForceUnlock deletes the lock whoever holds it; true if it existed.
func (c *Conn) ForceUnlock(ctx context.Context, name string) (bool, error) {
	keys := []string{name, LockChannel(name)}
	n, err := scripts.ForceUnlock.Run(ctx, c.rdb, keys, UnlockMessage, c.publish).Int64()
	return n == 1, err
}

// HoldCount is owner's hold count in the lock hash (0 when it holds nothing).
func (c *Conn) HoldCount(ctx context.Context, name, owner string) (int, error) {
	n, err := c.rdb.HGet(ctx, name, owner).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// Exists reports whether the lock key exists.
func (c *Conn) Exists(ctx context.Context, name string) (bool, error) {
	n, err := c.rdb.Exists(ctx, name).Result()
	return n == 1, err
}

// PTTL is the key's remaining time to live: 0 when the key is missing, -1 when
// it exists without an expiry.
func (c *Conn) PTTL(ctx context.Context, name string) (time.Duration, error) {
	d, err := c.rdb.PTTL(ctx, name).Result()
	if err != nil {
		return 0, err
	}
	switch d {
	case -2: // no such key
		return 0, nil
	case -1: // no expiry
		return -1, nil
	}
	return d, nil
}
