package redisio

import (
	"context"

	"github.com/lockactor/lockactor/scripts"
)

// The count-down latch (RedissonCountDownLatch): a decimal count with no
// TTL, deleted when it reaches zero.

// CountDownSet sets the count to n unless one is set: 1 set, 0 not (read
// with Reply.Int). It publishes CountDownNew when it sets.
func (c *Conn) CountDownSet(ctx context.Context, op Op, name string, n int64) Reply {
	keys := []string{name, CountDownChannel(name), op.Latch}
	return c.runLatched(ctx, op, scripts.Latched.CountDownSet, keys, n, c.publishArg(), op.Seq, op.keepMS())
}

// CountDown counts down by one, publishing CountDownZero when the count
// reaches zero; it returns the count left (read with Reply.Int).
func (c *Conn) CountDown(ctx context.Context, op Op, name string) Reply {
	keys := []string{name, CountDownChannel(name), op.Latch}
	return c.runLatched(ctx, op, scripts.Latched.CountDownDown, keys, c.publishArg(), op.Seq, op.keepMS())
}

// CountDownGet is the count (0 when none is set).
func (c *Conn) CountDownGet(ctx context.Context, name string) (int64, error) {
	return c.getCount(ctx, name)
}

// CountDownGetThen reads the count without waiting and hands it to then (on
// another goroutine, or at once when the Conn is closing; it must not
// block).
func (c *Conn) CountDownGetThen(ctx context.Context, name string, then func(n int64, err error)) {
	if !c.spawn(func() { then(c.CountDownGet(ctx, name)) }) {
		then(0, ErrClosed)
	}
}
