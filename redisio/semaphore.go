package redisio

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/scripts"
)

// The semaphore (RedissonSemaphore): a decimal count of available permits.

// SemaphoreAcquire takes n permits if that many are available.
func (c *Conn) SemaphoreAcquire(ctx context.Context, name string, n int) (bool, error) {
	v, err := scripts.SemaphoreAcquire.Run(ctx, c.rdb, []string{name}, n).Int64()
	return v == 1, err
}

// SemaphoreAdd adds n permits (n < 0 removes) and publishes the new count.
func (c *Conn) SemaphoreAdd(ctx context.Context, name string, n int) (int, error) {
	keys := []string{name, SemaphoreChannel(name)}
	v, err := scripts.SemaphoreRelease.Run(ctx, c.rdb, keys, n, c.publish).Int64()
	return int(v), err
}

// SemaphoreSet sets the count to n unless it is set; true if it was set.
func (c *Conn) SemaphoreSet(ctx context.Context, name string, n int) (bool, error) {
	keys := []string{name, SemaphoreChannel(name)}
	v, err := scripts.SemaphoreSet.Run(ctx, c.rdb, keys, n, c.publish).Int64()
	return v == 1, err
}

// SemaphoreGet is the count available (0 when unset).
func (c *Conn) SemaphoreGet(ctx context.Context, name string) (int, error) {
	s, err := c.rdb.Get(ctx, name).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(s)
}
