package redisio

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sending a call again. Some replies prove that a script did not run and
// that it will run if asked again a little later, on the master that owns
// its slot then:
//   - TRYAGAIN: its slot is being migrated and its keys are not all on one
//     side (a script that declares its name's channel, which never exists
//     as a key, always gets it there). Redisson retries it too.
//   - MOVED / ASK: the slot has moved to another master, or is moving. The
//     call must not be re-run through the cluster client: that sends no
//     WAIT after it. It goes to its new master's batcher, WAIT and all,
//     once go-redis has reloaded the slots.
//   - redis.ErrClosed from a Cluster node's client: go-redis closed that
//     client (the node had left the cluster state for a minute) and made a
//     new one; batcherFor hands the batcher the new one.
//   - a refused dial: nothing was sent; the master may be dead and its
//     replica promoted. Pipelines go to node clients directly, so go-redis
//     never sees their errors and would keep its slot map for up to its
//     ClusterStateReloadInterval (a minute by default): every connection
//     error asks it to reload now.
// Such calls wait in the batcher's later list, with calls queued behind
// them on the same slot, and are sent again together, in order, after a
// short backoff, until their ctx ends or retryFor has passed; then they are
// answered with the last reply (a Redis error: the script did not run).

// retry is a call's record of being sent again.
type retry struct {
	tries int
	first time.Time             // when it was first deferred
	last  Reply                 // the reply that deferred it; zero while it was never sent
	dead  redis.UniversalClient // the client that answered ErrClosed, if one did
}

// The backoff between tries, and how long a call with no deadline of its
// own is retried.
const (
	retryMin = 10 * time.Millisecond
	retryMax = 250 * time.Millisecond
	retryFor = 30 * time.Second
)

// retryable reports whether err proves a call did not run and may run when
// sent again.
func retryable(err error) bool {
	return redis.HasErrorPrefix(err, "TRYAGAIN") || isMoved(err) || errors.Is(err, redis.ErrClosed) || isDial(err)
}

// isDial reports a connection that could not be made: nothing was sent.
func isDial(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// isNetwork reports an error that is not the server's answer.
func isNetwork(err error) bool {
	var re redis.Error
	return err != nil && !errors.Is(err, redis.Nil) && !errors.As(err, &re)
}

// again defers c when r proves it did not run and a try later may succeed;
// false when c is to be answered with r now.
func (b *batcher) again(c *batchCall, r Reply, rdb redis.UniversalClient) bool {
	cc := b.c.topo.cluster
	if cc == nil {
		return false
	}
	if isNetwork(r.Err) {
		cc.ReloadState(c.ctx) // the master may be gone, its slots elsewhere now
	}
	if !retryable(r.Err) || c.ctx.Err() != nil {
		return false
	}
	now := time.Now()
	if c.first.IsZero() {
		c.first = now
	}
	if now.Sub(c.first) > retryFor {
		return false
	}
	if errors.Is(r.Err, redis.ErrClosed) {
		if c.dead == rdb {
			return false // the client go-redis gives for this master is the closed one
		}
		c.dead = rdb
	}
	if isMoved(r.Err) {
		b.c.topo.forget(b.addr)
		cc.ReloadState(c.ctx)
	}
	c.last = r
	c.tries++
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	if len(b.later) == 0 {
		b.laterDue = now.Add(min(retryMin<<min(c.tries-1, 5), retryMax))
	}
	b.later = append(b.later, c)
	return true
}

// holdBack moves the calls on a slot with calls in b.later behind them, and
// returns the others. The caller holds b.mu.
func (b *batcher) holdBack(calls []*batchCall) []*batchCall {
	if len(b.later) == 0 {
		return calls
	}
	held := make(map[int]bool, len(b.later))
	for _, c := range b.later {
		held[SlotOf(c.key)] = true
	}
	out := calls[:0]
	for _, c := range calls {
		if held[SlotOf(c.key)] {
			b.later = append(b.later, c)
		} else {
			out = append(out, c)
		}
	}
	return out
}

// idleFor is how long the flusher waits for work: until the later calls
// are due, or flusherIdle.
func (b *batcher) idleFor() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.later) > 0 {
		return max(time.Until(b.laterDue), time.Millisecond)
	}
	return flusherIdle
}

// redispatch sends the later calls, once due, to the batcher of their
// slot's master now, at the head of its queue and in their order; those
// whose time is over get their last reply.
func (b *batcher) redispatch() {
	b.mu.Lock()
	if len(b.later) == 0 || time.Now().Before(b.laterDue) {
		b.mu.Unlock()
		return
	}
	due := b.later
	b.later, b.laterDue = nil, time.Time{}
	b.mu.Unlock()
	var order []*batcher
	to := map[*batcher][]*batchCall{}
	for _, c := range due {
		if c.ctx.Err() != nil || (!c.first.IsZero() && time.Since(c.first) > retryFor) {
			b.giveUp(c, nil)
			continue
		}
		nb, err := b.c.batcherFor(c.ctx, c.key)
		if err != nil {
			b.giveUp(c, err)
			continue
		}
		if to[nb] == nil {
			order = append(order, nb)
		}
		to[nb] = append(to[nb], c)
	}
	for _, nb := range order {
		if !nb.queueFront(to[nb]) {
			for _, c := range to[nb] {
				b.giveUp(c, ErrClosed)
			}
		}
	}
}

// giveUp answers a later call that will not be sent again: with the reply
// that deferred it, or, for one never sent, with why it was not (err, or
// its ctx's error).
func (b *batcher) giveUp(c *batchCall, err error) {
	if c.then == nil {
		return
	}
	r := c.last
	if r.Err == nil {
		if err == nil {
			err = c.ctx.Err()
		}
		r = Reply{Err: notSent{err}}
	}
	c.then(r)
}

// queueFront puts calls at the head of the queue, in their order, starting
// or waking the flusher; false once close has begun.
func (b *batcher) queueFront(calls []*batchCall) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.pending = append(append(make([]*batchCall, 0, len(calls)+len(b.pending)), calls...), b.pending...)
	b.startLocked()
	return true
}

// clientGen is where b's pipelines go now, and what ends when they go
// elsewhere (see batcher.gen).
func (b *batcher) clientGen() (redis.UniversalClient, context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rdb, b.gen
}

// setClient hands b the client its pipelines go to from now: the one
// go-redis gives for its master now (a new one after go-redis closed the
// old), or the one RouteTo chose. A pipeline waiting on the client it
// replaces gives up (see batcher.gen).
func (b *batcher) setClient(rdb redis.UniversalClient) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rdb == b.rdb {
		return
	}
	b.rdb = rdb
	if b.gen != nil {
		b.genCancel()
		b.gen, b.genCancel = context.WithCancel(context.Background())
	}
}
