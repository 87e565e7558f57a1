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

// ReadLock runs read_lock.lua: granted, or the holder's remaining TTL (read
// with Reply.Acquire).
func (c *Conn) ReadLock(ctx context.Context, op Op, name, owner string, lease time.Duration) Reply {
	keys := []string{name, rwHoldPrefix(name, owner), op.Latch}
	return c.runLatched(ctx, op, scripts.Latched.ReadLock, keys, ms(lease), owner, WriteField(owner), op.Seq, op.keepMS())
}

// upgradeReply is write_lock.lua's answer to an owner holding only reads.
const upgradeReply = -3

// WriteLock runs write_lock.lua (read with Reply.Write).
func (c *Conn) WriteLock(ctx context.Context, op Op, name, owner string, lease time.Duration) Reply {
	return c.runLatched(ctx, op, scripts.Latched.WriteLock, []string{name, op.Latch}, ms(lease), WriteField(owner), owner, op.Seq, op.keepMS())
}

// ReadUnlock runs read_unlock.lua for one read hold of owner (read with
// Reply.Unlock).
func (c *Conn) ReadUnlock(ctx context.Context, op Op, name, owner string) Reply {
	keys := []string{name, RWChannel(name), rwHoldPrefix(name, owner), suffixBase(name), op.Latch}
	pub := c.publishArg()
	return c.runLatched(ctx, op, scripts.Latched.ReadUnlock, keys, readUnlockMessage, owner, pub, op.Seq, op.keepMS())
}

// WriteUnlock runs write_unlock.lua for one write hold of owner (read with
// Reply.Unlock).
func (c *Conn) WriteUnlock(ctx context.Context, op Op, name, owner string, lease time.Duration) Reply {
	keys := []string{name, RWChannel(name), op.Latch}
	pub := c.publishArg()
	return c.runLatched(ctx, op, scripts.Latched.WriteUnlock, keys, WriteUnlockMessage, ms(lease), WriteField(owner), pub, op.Seq, op.keepMS())
}

// RWRenew renews owner's read holds (write false) or write holds (write
// true), without waiting: then receives the outcome as Renew's does, and
// stale works as there.
func (c *Conn) RWRenew(ctx context.Context, name, owner string, write bool, lease time.Duration, stale func() bool, then func(bool, error)) {
	field, holdKeys := owner, "1"
	if write {
		field, holdKeys = WriteField(owner), "0"
	}
	keys := []string{name, rwHoldPrefix(name, owner)}
	c.submitFlag(ctx, stale, then, scripts.RWRenew, keys, ms(lease), field, holdKeys)
}

// RWForceUnlock deletes the lock if it is held in mode ("read" or "write").
func (c *Conn) RWForceUnlock(ctx context.Context, name, mode string) (bool, error) {
	keys := []string{name, RWChannel(name)}
	pub := c.publishCmd(ctx)
	n, err := scripts.RWForceUnlock.Run(ctx, c.cmds(), keys, mode, pub).Int64()
	return n == 1, err
}

// RWMode is the lock's mode: "read", "write", or "" when not held.
func (c *Conn) RWMode(ctx context.Context, name string) (string, error) {
	mode, err := c.cmds().HGet(ctx, name, "mode").Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return mode, err
}
