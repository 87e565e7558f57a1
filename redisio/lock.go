package redisio

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/scripts"
)

// The reentrant lock (RedissonLock) and the fenced lock built on it.

// Lock runs lock.lua: granted, or the holder's remaining time to live
// (negative when the key exists without an expiry).
func (c *Conn) Lock(ctx context.Context, name, owner string, lease time.Duration) (granted bool, ttl time.Duration, err error) {
	n, granted, err := intReply(scripts.Lock.Run(ctx, c.rdb, []string{name}, ms(lease), owner))
	return granted, time.Duration(n) * time.Millisecond, err
}

// FencedLock runs fenced_lock.lua: granted with the hold's fencing token, or
// the holder's remaining time to live.
func (c *Conn) FencedLock(ctx context.Context, name, owner string, lease time.Duration) (granted bool, ttl time.Duration, token uint64, err error) {
	keys := []string{name, TokenKey(name)}
	vals, err := scripts.FencedLock.Run(ctx, c.rdb, keys, ms(lease), owner).Int64Slice()
	if err != nil {
		return false, 0, 0, err
	}
	if len(vals) != 2 {
		return false, 0, 0, fmt.Errorf("fenced_lock.lua: unexpected reply %v", vals)
	}
	if vals[0] == 1 {
		return true, 0, uint64(vals[1]), nil
	}
	return false, time.Duration(vals[1]) * time.Millisecond, 0, nil
}

// Unlock runs unlock.lua for one hold of owner.
func (c *Conn) Unlock(ctx context.Context, name, owner string, lease time.Duration) (UnlockResult, error) {
	keys := []string{name, LockChannel(name)}
	return unlockResult(scripts.Unlock.Run(ctx, c.rdb, keys, UnlockMessage, ms(lease), owner, c.publish))
}

// Handoff releases one hold of owner and, if it was the last, gives the lock
// to next with lease in the same script (handoff.lua).
func (c *Conn) Handoff(ctx context.Context, name, owner string, lease time.Duration, next string, nextLease time.Duration) (UnlockResult, error) {
	return unlockResult(scripts.Handoff.Run(ctx, c.rdb, []string{name}, ms(lease), owner, next, ms(nextLease)))
}

// Renew re-applies lease while owner still holds the lock; false when it does not.
func (c *Conn) Renew(ctx context.Context, name, owner string, lease time.Duration) (bool, error) {
	n, err := c.batch.run(ctx, scripts.Renew, []string{name}, ms(lease), owner).Int64()
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
