package redisio

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/scripts"
)

// The reentrant lock (RedissonLock) and the fenced lock built on it. The
// calls that change the lock take an Op and return the raw Reply; Reply's
// methods read it (see latch.go).

// Lock runs lock.lua: granted, or the holder's remaining time to live
// (negative when the key exists without an expiry). Read with Reply.Acquire.
func (c *Conn) Lock(ctx context.Context, op Op, name, owner string, lease time.Duration) Reply {
	k, s := op.keysFor(name), scripts.Latched.Lock
	argv := []any{"evalsha", shaOf(s), 2, k.name, k.latch, msArg(lease), owner, op.Seq, msArg(op.Keep)}
	return c.runCall(ctx, op, &batchCall{ctx: ctx, script: s, key: name, argv: argv})
}

// FencedLock runs fenced_lock.lua: granted with the hold's fencing token,
// which is above floor, or the holder's remaining time to live; fresh asks
// for a new hold (a new token) whatever Redis has of owner's field. Read
// with Reply.Fenced.
func (c *Conn) FencedLock(ctx context.Context, op Op, name, owner string, lease time.Duration, floor uint64, fresh bool) Reply {
	newHold := "0"
	if fresh {
		newHold = "1"
	}
	return c.runLatched(ctx, op, scripts.Latched.FencedLock, []string{name, tokenKey(name), op.Latch},
		ms(lease), owner, strconv.FormatUint(floor, 10), newHold, op.Seq, op.keepMS())
}

// Unlock runs unlock.lua for one hold of owner; the last hold's release
// publishes UnlockMessage on the lock's channel. Read with Reply.Unlock: a
// server that refuses the publish (an ACL) does not fail the release, which
// reads as ReleasedQuiet then.
func (c *Conn) Unlock(ctx context.Context, op Op, name, owner string, lease time.Duration) Reply {
	return c.unlock(ctx, op, name, owner, lease, c.publishArg(), nil)
}

// UnlockNoted is Unlock with a note: when the last hold goes, it first
// publishes note on the lock channel's ListenerMark, so that other
// lockactor Clients can tell this release from a Redisson client's.
func (c *Conn) UnlockNoted(ctx context.Context, op Op, name, owner string, lease time.Duration, note string) Reply {
	return c.unlock(ctx, op, name, owner, lease, c.publishArg(), &note)
}

// UnlockQuiet is Unlock without the publish: the last hold's release reads
// as ReleasedQuiet (a SpinLock whose Client was given WithSpinPublish(false)).
func (c *Conn) UnlockQuiet(ctx context.Context, op Op, name, owner string, lease time.Duration) Reply {
	return c.unlock(ctx, op, name, owner, lease, "", nil)
}

// unlock runs unlock.lua with pub as its publish command ("" for none),
// and note, if not nil, published on the channel's ListenerMark.
func (c *Conn) unlock(ctx context.Context, op Op, name, owner string, lease time.Duration, pub any, note *string) Reply {
	k, s := op.keysFor(name), scripts.Latched.Unlock
	noteOn, said := "", ""
	if note != nil {
		noteOn, said = ListenerMark(LockChannel(name)), *note
	}
	argv := []any{"evalsha", shaOf(s), 3, k.name, k.channel, k.latch,
		UnlockMessage, msArg(lease), owner, pub, noteOn, said, op.Seq, msArg(op.Keep)}
	return c.runCall(ctx, op, &batchCall{ctx: ctx, script: s, key: name, argv: argv})
}

// Handoff releases one hold of owner and, if it was the last, gives the lock
// to next with nextLease in the same script (handoff.lua). Read with
// Reply.Unlock.
func (c *Conn) Handoff(ctx context.Context, op Op, name, owner string, lease time.Duration, next string, nextLease time.Duration) Reply {
	k, s := op.keysFor(name), scripts.Latched.Handoff
	argv := []any{"evalsha", shaOf(s), 2, k.name, k.latch, msArg(lease), owner, next, msArg(nextLease), op.Seq, msArg(op.Keep)}
	return c.runCall(ctx, op, &batchCall{ctx: ctx, script: s, key: name, argv: argv})
}

// Renew re-applies lease while owner still holds the lock, without waiting:
// then receives true, or false when owner no longer holds it (on another
// goroutine; it must not block). Renewals from every actor go out together
// (batcher), in order with the name's other scripts. A renewal for which
// stale (if not nil) reports true by the time its pipeline leaves is not
// sent: its hold was released meanwhile, and then gets ErrStale.
func (c *Conn) Renew(ctx context.Context, name, owner string, lease time.Duration, stale func() bool, then func(bool, error)) {
	c.submitFlag(ctx, stale, then, scripts.Renew, []string{name}, ms(lease), owner)
}

// submitFlag queues a script whose reply is 1 (done: renewed, cancelled) or 0
// (the hold or the waiter was not there). then is always called, at once
// when the script cannot be queued. A 1 that too few replicas confirmed
// (with replica sync on) is an error matching ErrNotReplicated: a failover
// may lose it, so a renewal confirms no lease and a cancel is sent again.
func (c *Conn) submitFlag(ctx context.Context, stale func() bool, then func(bool, error), s *redis.Script, keys []string, args ...any) {
	b, err := c.batcherFor(ctx, keys[0])
	if err != nil {
		then(false, err)
		return
	}
	read := func(r Reply) {
		n, err := r.Int()
		if err == nil && n == 1 && r.Unsynced {
			then(false, r.NotReplicated())
			return
		}
		then(n == 1, err)
	}
	call := newCall(ctx, s, keys, args, read)
	call.stale = stale
	if !b.queue(call) {
		then(false, ErrClosed)
	}
}

// ForceUnlock deletes the lock whoever holds it and publishes UnlockMessage
// on its channel; true if it existed. A server that refuses the publish (an
// ACL) does not fail the deletion: it is logged once (Untold).
func (c *Conn) ForceUnlock(ctx context.Context, name string) (bool, error) {
	return c.forceUnlock(ctx, name, c.publishCmd(ctx))
}

// ForceUnlockQuiet is ForceUnlock without the publish (a SpinLock whose
// Client was given WithSpinPublish(false)).
func (c *Conn) ForceUnlockQuiet(ctx context.Context, name string) (bool, error) {
	return c.forceUnlock(ctx, name, "")
}

// forceUnlock runs force_unlock.lua with pub as its publish command ("" for
// none).
func (c *Conn) forceUnlock(ctx context.Context, name, pub string) (bool, error) {
	keys := []string{name, LockChannel(name)}
	n, err := scripts.ForceUnlock.Run(ctx, c.cmds(), keys, UnlockMessage, pub).Int64()
	if n == 2 && pub != "" {
		c.Untold(name)
	}
	return n != 0, err
}

// Untold logs, once per Client, that the server refused to publish a release
// message for name: the release stands, but waiters that listen on the
// lock's channel, in other Clients or in Redisson, hear nothing and take the
// lock only at their next retry, at most the holder's lease later. The lock
// actors call it when a release they asked to publish comes back
// ReleasedQuiet.
func (c *Conn) Untold(name string) {
	c.warnOnce("untold", slog.LevelWarn, "lockactor: the server refused to publish a release message (an ACL user "+
		"denied the channel or PUBLISH?); the release stands, but Lock waiters of the name in other Clients take "+
		"it only at their next retry, up to the holder's lease later. A SpinLock's Client on such a server should "+
		"be given WithSpinPublish(false)", "lock", name, "channel", LockChannel(name))
}

// HoldCount is owner's hold count in the lock hash (0 when it holds nothing).
func (c *Conn) HoldCount(ctx context.Context, name, owner string) (int, error) {
	n, err := c.cmds().HGet(ctx, name, owner).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// Exists reports whether the lock key exists.
func (c *Conn) Exists(ctx context.Context, name string) (bool, error) {
	n, err := c.cmds().Exists(ctx, name).Result()
	return n == 1, err
}

// PTTL is the key's remaining time to live: 0 when the key is missing, -1 when
// it exists without an expiry.
func (c *Conn) PTTL(ctx context.Context, name string) (time.Duration, error) {
	d, err := c.cmds().PTTL(ctx, name).Result()
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
