package lockactor

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/lockactor/lockactor/actors"
	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// A CountDownLatch is Redisson's RCountDownLatch: a count shared by every
// client of a Redis, set once with TrySetCount and counted down by any
// handle; Await callers on every client are released when it reaches 0.
// The key holds the count, with no expiry, and is deleted when the count
// reaches 0, so a latch can be set again once it has opened. Waiters are
// woken by the zero message on redisson_countdownlatch__channel__{name} and
// re-check the count once a second, so a lost message cannot strand them.
type CountDownLatch struct {
	c    *Client
	name string
	key  actors.Key
}

// CountDownLatch returns a handle on the count-down latch name (Redisson's
// RCountDownLatch). An empty name surfaces as ErrInvalidArgument from the
// handle's first call.
func (c *Client) CountDownLatch(name string) *CountDownLatch {
	return &CountDownLatch{c: c, name: name, key: actors.Key{Kind: actors.KindCountDown, Name: name}}
}

// Name is the latch's name, its Redis key.
func (l *CountDownLatch) Name() string { return l.name }

// latchSlotProblem is the ErrInvalidArgument text for a latch name with a
// hash tag on a Cluster: Redisson's channel wraps the whole name in braces,
// so the channel of a name with braces of its own lands in another slot
// than the name, and the scripts that publish on it would fail CROSSSLOT.
const latchSlotProblem = "on a Redis Cluster a latch name cannot contain '{' or '}': " +
	"its channel, redisson_countdownlatch__channel__{name}, would land in another slot"

// check rejects calls that must not reach Redis.
func (l *CountDownLatch) check(ctx context.Context) error {
	switch {
	case ctx == nil:
		return kindLatch.invalid(l.name, "nil context")
	case l.name == "":
		return kindLatch.invalid(l.name, "empty latch name")
	case l.c.cluster && strings.ContainsAny(l.name, "{}"):
		return kindLatch.invalid(l.name, latchSlotProblem)
	case l.c.closed():
		return kindLatch.closed(l.name)
	}
	return nil
}

// TrySetCount sets the count to n (> 0) only when no count is set (none
// ever was, or the last one reached 0); true if it was set, and then Await
// callers wait for it. If it returns an error, the count was not set,
// unless Redis could not be reached to confirm (the error then says the
// outcome is unknown); if ctx ends first, the count may still be set.
func (l *CountDownLatch) TrySetCount(ctx context.Context, n int64) (bool, error) {
	if err := l.check(ctx); err != nil {
		return false, err
	}
	if n <= 0 || n > math.MaxInt {
		return false, kindLatch.invalid(l.name, fmt.Sprintf("count %d", n))
	}
	res, err := l.adjust(ctx, &messages.Adjust{N: int(n), SetOnly: true})
	return res.Set, err
}

// CountDown decrements the count by one and, when it reaches 0, deletes it
// and releases the Await callers of every client; at 0 (no count set) it
// stays 0. It is applied at most once, also when a connection breaks
// mid-call; an error means it was not applied, unless Redis could not be
// reached to confirm (the error then says the outcome is unknown). If ctx
// ends first, it may still be applied.
func (l *CountDownLatch) CountDown(ctx context.Context) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	_, err := l.adjust(ctx, &messages.Adjust{N: -1})
	return err
}

// adjust asks the latch's actor to run m and waits for its answer, ctx or
// Close.
func (l *CountDownLatch) adjust(ctx context.Context, m *messages.Adjust) (messages.AdjustResult, error) {
	return sendAdjust(ctx, l.c, l.key, kindLatch, l.name, m)
}

// Count is the count now: 0 when none is set.
func (l *CountDownLatch) Count(ctx context.Context) (int64, error) {
	if err := l.check(ctx); err != nil {
		return 0, err
	}
	return guarded(ctx, l.c, kindLatch, l.name, func(ctx context.Context, io *redisio.Conn) (int64, error) {
		return io.CountDownGet(ctx, l.name)
	})
}

// Await waits until the count reaches 0 and returns nil, at once when no
// count is set. If ctx ends first the error matches ctx.Err(); after Close,
// ErrClosed.
func (l *CountDownLatch) Await(ctx context.Context) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	start := time.Now()
	m := &messages.Acquire{Req: messages.NewRequest()}
	res, err := l.c.await(ctx, l.key, m, nil, func() {}) // nothing to give back
	if err == nil {
		err = res.Err
	}
	if err != nil {
		err = kindLatch.err(l.name, err)
	}
	l.c.metrics.acquisition(ctx, kindLatch, l.name, start, err == nil, err)
	return err
}
