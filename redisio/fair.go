package redisio

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/scripts"
)

// The fair lock (RedissonFairLock): a reentrant lock whose waiters queue in
// Redis, each woken on its own channel.

// fairKeys are every fair script's keys: the lock, its queue, its
// deadlines and its channel. The channel never exists as a key, which
// keeps the scripts from starting on a migrating slot (see
// docs/PROTOCOL.md, "A migrating slot"); the latched ones add the latch.
func (c *Conn) fairKeys(name string) []string {
	return []string{name, FairQueue(name), FairTimeouts(name), LockChannel(name)}
}

// FairLock runs fair_lock.lua: granted, or queued with an estimated wait
// (read with Reply.Acquire). w is how long a queued waiter may go without
// retrying before it is purged; a tryOnly attempt never joins the queue.
func (c *Conn) FairLock(ctx context.Context, op Op, name, owner string, lease, w time.Duration, now time.Time, tryOnly bool) Reply {
	once := "0"
	if tryOnly {
		once = "1"
	}
	keys := append(c.fairKeys(name), op.Latch)
	return c.runLatched(ctx, op, scripts.Latched.FairLock, keys, ms(lease), owner, ms(w), now.UnixMilli(), once, op.Seq, op.keepMS())
}

// FairUnlock runs fair_unlock.lua for one hold of owner (read with
// Reply.Unlock).
func (c *Conn) FairUnlock(ctx context.Context, op Op, name, owner string, lease time.Duration, now time.Time) Reply {
	keys := append(c.fairKeys(name), op.Latch)
	pub := c.publishArg()
	return c.runLatched(ctx, op, scripts.Latched.FairUnlock, keys, UnlockMessage, ms(lease), owner, now.UnixMilli(), pub, op.Seq, op.keepMS())
}

// FairCancel takes owner out of the queue (fair_cancel.lua), purging waiters
// whose deadline had passed by now from its head; true if owner was queued.
// Running it twice changes nothing, so it needs no latch.
func (c *Conn) FairCancel(ctx context.Context, name, owner string, w time.Duration, now time.Time) (bool, error) {
	keys := c.fairKeys(name)
	pub := c.publishCmd(ctx)
	n, err := scripts.FairCancel.Run(ctx, c.cmds(), keys, owner, ms(w), UnlockMessage, pub, now.UnixMilli()).Int64()
	return n == 1, err
}

// FairCancelThen is FairCancel without waiting: the script goes out with
// the name's next pipeline, after the name's earlier scripts, and then
// receives its outcome (on another goroutine, or at once when the script
// cannot be queued; it must not block).
func (c *Conn) FairCancelThen(ctx context.Context, name, owner string, w time.Duration, now time.Time, then func(bool, error)) {
	keys := c.fairKeys(name)
	pub := c.publishArg()
	c.submitFlag(ctx, nil, then, scripts.FairCancel, keys, owner, ms(w), UnlockMessage, pub, now.UnixMilli())
}

// FairForceUnlock deletes the lock whoever holds it and wakes the queue's
// head, after purging the waiters whose deadline had passed by now
// (fair_force_unlock.lua).
func (c *Conn) FairForceUnlock(ctx context.Context, name string, now time.Time) (bool, error) {
	keys := c.fairKeys(name)
	pub := c.publishCmd(ctx)
	n, err := scripts.FairForceUnlock.Run(ctx, c.cmds(), keys, UnlockMessage, now.UnixMilli(), pub).Int64()
	return n == 1, err
}

// FairQueueLen is the number of owners queued in the fair lock's Redis
// queue, from every client.
func (c *Conn) FairQueueLen(ctx context.Context, name string) (int, error) {
	n, err := c.cmds().LLen(ctx, FairQueue(name)).Result()
	return int(n), err
}

// FairQueuePosition is owner's place in the fair lock's queue, 1 for the
// head; 0 when it is not queued.
func (c *Conn) FairQueuePosition(ctx context.Context, name, owner string) (int, error) {
	i, err := c.cmds().LPos(ctx, FairQueue(name), owner, redis.LPosArgs{}).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return int(i) + 1, err
}
