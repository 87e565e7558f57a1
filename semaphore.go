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
	return checkPermits(ctx, s.c, kindSemaphore, s.name, n, minN)
}

// checkPermits rejects a call on the semaphore name of c (a Semaphore's or
// a PermitSemaphore's) that must not reach Redis: n permits, at least minN.
func checkPermits(ctx context.Context, c *Client, k kind, name string, n, minN int) error {
	switch {
	case ctx == nil:
		return k.invalid(name, "nil context")
	case name == "":
		return k.invalid(name, "empty semaphore name")
	case c.cluster && !slotSafe(name):
		return k.invalid(name, slotProblem)
	case n < minN:
		return k.invalid(name, fmt.Sprintf("%d permits", n))
	case c.closed():
		return k.closed(name)
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
	return guarded(ctx, s.c, kindSemaphore, s.name, fn)
}

// TrySetPermits sets the number of permits to n (>= 0) only if it has never
// been set; true if it was set. If it returns an error, the permits were not
// set, unless Redis could not be reached to confirm (the error then says the
// outcome is unknown); if ctx ends first, the change may still be made.
func (s *Semaphore) TrySetPermits(ctx context.Context, n int) (bool, error) {
	if err := s.check(ctx, n, 0); err != nil {
		return false, err
	}
	res, err := s.adjust(ctx, &messages.Adjust{N: n, SetOnly: true})
	return res.Set, err
}

// AddPermits adds n permits; n < 0 removes them (the count may go below zero,
// and acquirers then wait until enough are released). The change is applied
// at most once, also when a connection breaks mid-call; an error means it
// was not applied, unless Redis could not be reached to confirm (the error
// then says the outcome is unknown). If ctx ends first, the change may still
// be made.
func (s *Semaphore) AddPermits(ctx context.Context, n int) error {
	if err := s.check(ctx, n, math.MinInt); err != nil {
		return err
	}
	_, err := s.adjust(ctx, &messages.Adjust{N: n})
	return err
}

// adjust asks the semaphore's actor to change the permits and waits for its
// answer, ctx or Close.
func (s *Semaphore) adjust(ctx context.Context, m *messages.Adjust) (messages.AdjustResult, error) {
	return sendAdjust(ctx, s.c, s.key, kindSemaphore, s.name, m)
}

// sendAdjust sends m to the actor of key (a Semaphore's or a
// PermitSemaphore's) and waits for its answer, ctx or Close.
func sendAdjust(ctx context.Context, c *Client, key actors.Key, k kind, name string, m *messages.Adjust) (messages.AdjustResult, error) {
	start := time.Now()
	if err := c.reachable(ctx); err != nil {
		return messages.AdjustResult{}, k.err(name, err)
	}
	m.Reply = make(chan messages.AdjustResult, 1)
	send := func(msg any) error { return c.rt.Send(key, msg) }
	res, err := awaitReply(ctx, send, c.done, m, m.Reply)
	err = c.named(ctx, start, err)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return res, k.err(name, err)
	}
	return res, nil
}

// AvailablePermits is the number of permits available now (0 when unset).
func (s *Semaphore) AvailablePermits(ctx context.Context) (int, error) {
	return direct(ctx, s, 0, 0, func(ctx context.Context, io *redisio.Conn) (int, error) {
		return io.SemaphoreGet(ctx, s.name)
	})
}

// Release gives back n (> 0) permits and wakes waiters on every client. The
// permits are given back once, whatever happens: if Release returns an error
// matching ErrReleasePending (Redis did not confirm, or ctx ended first), the
// runtime keeps giving them back in the background until Redis confirms, for
// as long as the Client lives. Do not call Release again for them. A
// release Redis refuses for good (the name holds another kind's data)
// returns Redis's error alone, and is not retried.
func (s *Semaphore) Release(ctx context.Context, n int) error {
	if err := s.check(ctx, n, 1); err != nil {
		return err
	}
	send := func(msg any) error { return s.c.rt.Send(s.key, msg) }
	res, err := s.c.release(ctx, send, &messages.Release{Permits: n})
	return releaseErr(kindSemaphore, s.name, res, err)
}

// Acquire takes n (> 0) permits, waiting until they are available or ctx
// ends; then the error matches ctx.Err() and no permits are taken (permits
// taken as the ctx ended are given back).
func (s *Semaphore) Acquire(ctx context.Context, n int) error {
	_, err := s.acquire(ctx, n, false, nil)
	return err
}

// TryAcquire takes n (> 0) permits if they are available within wait (0: one
// attempt); (false, nil) when they were not. With replica sync on, a single
// attempt whose permits too few replicas confirmed gives them back and
// returns an error matching ErrNotReplicated; with a wait it tries again.
func (s *Semaphore) TryAcquire(ctx context.Context, n int, wait time.Duration) (bool, error) {
	if wait < 0 {
		return false, kindSemaphore.invalid(s.name, "negative wait")
	}
	if wait == 0 {
		return s.acquire(ctx, n, true, nil)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	return s.acquire(ctx, n, false, t.C)
}

// acquire takes n permits, and records the call in the metrics (a call
// refused by check is not recorded: nothing was attempted).
func (s *Semaphore) acquire(ctx context.Context, n int, tryOnly bool, expired <-chan time.Time) (bool, error) {
	if err := s.check(ctx, n, 1); err != nil {
		return false, err
	}
	start := time.Now()
	ok, err := s.ask(ctx, n, tryOnly, expired)
	s.c.metrics.acquisition(ctx, kindSemaphore, s.name, start, ok, err)
	return ok, err
}

// ask is acquire without the checks and the metrics.
func (s *Semaphore) ask(ctx context.Context, n int, tryOnly bool, expired <-chan time.Time) (bool, error) {
	m := &messages.Acquire{Permits: n, TryOnly: tryOnly, Req: messages.NewRequest()}
	res, err := s.c.await(ctx, s.key, m, expired, func() {
		// The permits were taken as ctx ended: the actor gives them back.
		_ = s.c.rt.Send(s.key, &messages.Release{Permits: n})
	})
	switch {
	case err != nil:
		return false, kindSemaphore.err(s.name, err)
	case res.Err != nil:
		return false, kindSemaphore.err(s.name, res.Err)
	}
	return res.Granted, nil
}
