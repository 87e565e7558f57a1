package redisio

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/scripts"
)

// The read-write lock (RedissonReadWriteLock): one hash with a mode field, a
// read field and a write field per owner, and one key per read hold.

// WriteField is the hash field of an owner's write holds.
func WriteField(owner string) string { return owner + ":write" }

// ReadLock runs read_lock.lua: granted, or the holder's remaining TTL.
func (c *Conn) ReadLock(ctx context.Context, name, owner string, lease time.Duration) (granted bool, ttl time.Duration, err error) {
	keys := []string{name, RWHoldPrefix(name, owner)}
	n, granted, err := intReply(scripts.ReadLock.Run(ctx, c.rdb, keys, ms(lease), owner, WriteField(owner)))
	return granted, time.Duration(n) * time.Millisecond, err
}

// upgradeReply is write_lock.lua's answer to an owner holding only reads.
const upgradeReply = -3

// WriteLock runs write_lock.lua. upgrade is true when owner holds read holds
// and no write hold: waiting would wait for itself.
func (c *Conn) WriteLock(ctx context.Context, name, owner string, lease time.Duration) (granted, upgrade bool, ttl time.Duration, err error) {
	n, granted, err := intReply(scripts.WriteLock.Run(ctx, c.rdb, []string{name}, ms(lease), WriteField(owner), owner))
	if n == upgradeReply {
		return false, true, 0, err
	}
	return granted, false, time.Duration(n) * time.Millisecond, err
}

// ReadUnlock runs read_unlock.lua for one read hold of owner.
func (c *Conn) ReadUnlock(ctx context.Context, name, owner string) (UnlockResult, error) {
	keys := []string{name, RWChannel(name), RWHoldPrefix(name, owner), suffixBase(name)}
	return unlockResult(scripts.ReadUnlock.Run(ctx, c.rdb, keys, ReadUnlockMessage, owner, c.publish))
}

// WriteUnlock runs write_unlock.lua for one write hold of owner.
func (c *Conn) WriteUnlock(ctx context.Context, name, owner string, lease time.Duration) (UnlockResult, error) {
	keys := []string{name, RWChannel(name)}
	return unlockResult(scripts.WriteUnlock.Run(ctx, c.rdb, keys, WriteUnlockMessage, ms(lease), WriteField(owner), c.publish))
}

// RWRenew renews owner's read holds (write false) or write holds (write true).
func (c *Conn) RWRenew(ctx context.Context, name, owner string, write bool, lease time.Duration) (bool, error) {
	field, holdKeys := owner, "1"
	if write {
		field, holdKeys = WriteField(owner), "0"
	}
	keys := []string{name, RWHoldPrefix(name, owner)}
	n, err := c.batch.run(ctx, scripts.RWRenew, keys, ms(lease), field, holdKeys).Int64()
	return n == 1, err
}

// RWForceUnlock deletes the lock if it is held in mode ("read" or "write").
func (c *Conn) RWForceUnlock(ctx context.Context, name, mode string) (bool, error) {
	keys := []string{name, RWChannel(name)}
	n, err := scripts.RWForceUnlock.Run(ctx, c.rdb, keys, mode, c.publish).Int64()
	return n == 1, err
}

// RWMode is the lock's mode: "read", "write", or "" when not held.
func (c *Conn) RWMode(ctx context.Context, name string) (string, error) {
	mode, err := c.rdb.HGet(ctx, name, "mode").Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return mode, err
}
