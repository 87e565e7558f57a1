package lockactor

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/lockactor/lockactor/actors"
	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// A Semaphore is a counting semaphore shared by every client of a Redis
// (RedissonSemaphore): the key holds the number of available permits, with
// no expiry. Permits are not owned: any handle may release them, and permits
// of a crashed process are not given back. Waiters are woken by the count
// published on redisson_sc:{name} and re-check once a second, so a lost
// message cannot strand them.
type Semaphore struct {
	c    *Client
	name string
	key  actors.Key
}

// Semaphore returns a handle on the semaphore name. An empty name surfaces as
// ErrInvalidArgument from the handle's first call.
func (c *Client) Semaphore(name string) *Semaphore {
	return &Semaphore{c: c, name: name, key: actors.Key{Kind: actors.KindSemaphore, Name: name}}
}

// Name is the semaphore's name, its Redis key.
func (s *Semaphore) Name() string { return s.name }

// check rejects calls that must not reach Redis.
func (s *Semaphore) check(ctx context.Context, n int, minN int) error {
	switch {
	case ctx == nil:
		return invalid(s.name, "nil context")
	case s.name == "":
		return invalid(s.name, "empty semaphore name")
	case s.c.cluster && !slotSafe(s.name):
		return invalid(s.name, "on a Redis Cluster a name with '{' needs a non-empty {hash tag}")
	case n < minN:
		return invalid(s.name, fmt.Sprintf("%d permits", n))
	case s.c.closed():
		return errClosed(s.name)
	}
	return nil
}

// direct runs one redisio call under ctx's deadline after validation (see
// guarded).
func direct[T any](ctx context.Context, s *Semaphore, n, minN int, fn func(context.Context, *redisio.Conn) (T, error)) (T, error) {
	if err := s.check(ctx, n, minN); err != nil {
		var zero T
		return zero, err
	}
	return guarded(ctx, s.c, s.name, fn)
}

// TrySetPermits sets the number of permits to n (>= 0) only if it has never
// been set; true if it was set.
func (s *Semaphore) TrySetPermits(ctx context.Context, n int) (bool, error) {
	return direct(ctx, s, n, 0, func(ctx context.Context, io *redisio.Conn) (bool, error) {
		return io.SemaphoreSet(ctx, s.name, n)
	})
}

// AddPermits adds n permits; n < 0 removes them (the count may go below zero,
// and acquirers then wait until enough are released).
func (s *Semaphore) AddPermits(ctx context.Context, n int) error {
	return s.add(ctx, n, math.MinInt)
}

func (s *Semaphore) add(ctx context.Context, n, minN int) error {
	_, err := direct(ctx, s, n, minN, func(ctx context.Context, io *redisio.Conn) (int, error) {
		return io.SemaphoreAdd(ctx, s.name, n)
	})
	return err
}

// AvailablePermits is the number of permits available now (0 when unset).
func (s *Semaphore) AvailablePermits(ctx context.Context) (int, error) {
	return direct(ctx, s, 0, 0, func(ctx context.Context, io *redisio.Conn) (int, error) {
		return io.SemaphoreGet(ctx, s.name)
	})
}

// Release gives back n (> 0) permits and wakes waiters on every client.
func (s *Semaphore) Release(ctx context.Context, n int) error {
	return s.add(ctx, n, 1)
}

// Acquire takes n (> 0) permits, waiting until they are available or ctx
// ends; then the error matches ctx.Err() and no permits are taken (permits
// taken as the ctx ended are given back).
func (s *Semaphore) Acquire(ctx context.Context, n int) error {
	_, err := s.acquire(ctx, n, false, nil)
	return err
}

// TryAcquire takes n (> 0) permits if they are available within wait (0: one
// attempt); (false, nil) when they were not.
func (s *Semaphore) TryAcquire(ctx context.Context, n int, wait time.Duration) (bool, error) {
	if wait < 0 {
		return false, invalid(s.name, "negative wait")
	}
	if wait == 0 {
		return s.acquire(ctx, n, true, nil)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	return s.acquire(ctx, n, false, t.C)
}

func (s *Semaphore) acquire(ctx context.Context, n int, tryOnly bool, expired <-chan time.Time) (bool, error) {
	if err := s.check(ctx, n, 1); err != nil {
		return false, err
	}
	m := &messages.Acquire{Permits: n, TryOnly: tryOnly, Req: messages.NewRequest()}
	res, err := s.c.await(ctx, s.key, m, expired, func() {
		// The permits were taken as ctx ended: give them back, past ctx.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = guarded(ctx, s.c, s.name, func(ctx context.Context, io *redisio.Conn) (int, error) {
			return io.SemaphoreAdd(ctx, s.name, n)
		})
	})
	switch {
	case err != nil:
		return false, nameError(s.name, err)
	case res.Err != nil:
		return false, nameError(s.name, res.Err)
	}
	return res.Granted, nil
}
