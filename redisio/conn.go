package redisio

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Conn runs lock commands on the user's go-redis client.
type Conn struct {
	rdb     redis.UniversalClient
	publish string   // "publish", or "spublish" on a sharded cluster
	batch   *batcher // renewals, pipelined across actors

	// calls counts guarded commands still running after their caller left;
	// Close waits for them so no goroutine outlives the Client.
	calls sync.WaitGroup
}

// NewConn wraps rdb. It does not take ownership: closing rdb is the caller's.
// sharded makes the scripts publish with SPUBLISH (Redis Cluster 7+, matching
// Redisson's default there); otherwise they PUBLISH.
func NewConn(rdb redis.UniversalClient, sharded bool) *Conn {
	c := &Conn{rdb: rdb, publish: "publish", batch: &batcher{rdb: rdb}}
	if sharded {
		c.publish = "spublish"
	}
	return c
}

// Wait blocks until every guarded command that outlived its caller has ended.
func (c *Conn) Wait() { c.calls.Wait() }

// Guard runs fn on c and returns when fn does or when ctx ends, whichever
// comes first. go-redis ignores ctx deadlines on socket reads unless the user
// enabled ContextTimeoutEnabled, so a hung server would otherwise hold the
// caller for the client's whole read timeout. A command abandoned this way
// still finishes in the background (its result is dropped); c.Wait waits for
// it.
func Guard[T any](ctx context.Context, c *Conn, fn func(context.Context) (T, error)) (T, error) {
	if ctx.Done() == nil {
		return fn(ctx)
	}
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	c.calls.Add(1)
	go func() {
		defer c.calls.Done()
		v, err := fn(context.WithoutCancel(ctx))
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// ms renders a duration as the whole milliseconds Redis expects, at least 1.
func ms(d time.Duration) string {
	n := d.Milliseconds()
	if n < 1 {
		n = 1
	}
	return strconv.FormatInt(n, 10)
}

// intReply reads a script's integer reply; a nil reply is (0, true).
func intReply(cmd *redis.Cmd) (n int64, isNil bool, err error) {
	n, err = cmd.Int64()
	if errors.Is(err, redis.Nil) {
		return 0, true, nil
	}
	return n, false, err
}

// unlockResult maps the nil/0/1 reply of every unlock script.
func unlockResult(cmd *redis.Cmd) (UnlockResult, error) {
	n, isNil, err := intReply(cmd)
	switch {
	case err != nil || isNil:
		return NotHeld, err
	case n == 1:
		return Released, nil
	case n == 2:
		return Left, nil
	case n == 3:
		return HandedOver, nil
	}
	return StillHeld, nil
}

// UnlockResult is what one release did.
type UnlockResult int

// The outcomes of the unlock scripts.
const (
	NotHeld    UnlockResult = iota // the owner held nothing; nothing changed
	StillHeld                      // one hold released, others remain
	Released                       // last hold released, waiters told
	Left                           // the owner's last hold released; others still hold
	HandedOver                     // the owner's last hold released and the lock given to the next owner
)
