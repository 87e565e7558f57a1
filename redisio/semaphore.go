package redisio

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/scripts"
)

// The semaphore (RedissonSemaphore): a decimal count of available permits.

// SemaphoreAcquire takes n permits if that many are available: 1 taken, 0 not
// (read with Reply.Int).
func (c *Conn) SemaphoreAcquire(ctx context.Context, op Op, name string, n int) Reply {
	return c.runLatched(ctx, op, scripts.Latched.SemaphoreAcquire, []string{name, op.Latch}, n, op.Seq, op.keepMS())
}

// SemaphoreAdd adds n permits (n < 0 removes) and publishes the new count,
// which it returns (read with Reply.Int).
func (c *Conn) SemaphoreAdd(ctx context.Context, op Op, name string, n int) Reply {
	keys := []string{name, SemaphoreChannel(name), op.Latch}
	pub := c.publishArg()
	return c.runLatched(ctx, op, scripts.Latched.SemaphoreRelease, keys, n, pub, op.Seq, op.keepMS())
}

// SemaphoreSet sets the count to n unless it is set: 1 set, 0 it existed
// (read with Reply.Int).
func (c *Conn) SemaphoreSet(ctx context.Context, op Op, name string, n int) Reply {
	keys := []string{name, SemaphoreChannel(name), op.Latch}
	pub := c.publishArg()
	return c.runLatched(ctx, op, scripts.Latched.SemaphoreSet, keys, n, pub, op.Seq, op.keepMS())
}

// SemaphoreGet is the count available (0 when unset).
func (c *Conn) SemaphoreGet(ctx context.Context, name string) (int, error) {
	n, err := c.getCount(ctx, name)
	return int(n), err
}

// getCount reads a decimal count held at name: a semaphore's permits or a
// CountDownLatch's count; 0 when the key is missing.
func (c *Conn) getCount(ctx context.Context, name string) (int64, error) {
	n, err := c.cmds().Get(ctx, name).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}
