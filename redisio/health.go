package redisio

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// What the Conn last heard from Redis: when a reply last came, when the
// last error that kept a command from the servers came (a refused or
// broken connection, a timeout), and that error. Redis has answered since
// its last failure when the reply is the later of the two. An acquisition
// on a Client that has not heard from Redis since checks first that it can
// (Reachable), so that an unreachable Redis fails the call at once, naming
// why, rather than looking like a busy lock; and a call that ends with its
// ctx while Redis could not be reached names the last error (LastErr).
type health struct {
	lastReply atomic.Int64 // UnixNano; 0: no reply yet
	lastFail  atomic.Int64 // UnixNano; 0: no failure yet

	mu      sync.Mutex
	err     error      // the last failure
	probing *probeCall // Reachable's PING in flight
}

// answered reports whether a reply came since the last failure (false
// before the first reply).
func (h *health) answered() bool {
	r := h.lastReply.Load()
	return r != 0 && r >= h.lastFail.Load()
}

// noteReply records what a command's outcome says of the connection: a
// reply (an error reply too) means Redis answered. The batchers note one
// outcome per round trip.
func (c *Conn) noteReply(err error) {
	switch {
	case err == nil || isReply(err):
		c.health.lastReply.Store(time.Now().UnixNano())
		return
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, ErrClosed), errors.Is(err, ErrStale), errors.Is(err, ErrPending):
		return // the caller's doing, or no command at all: nothing heard
	}
	c.health.mu.Lock()
	c.health.err = err
	c.health.lastFail.Store(time.Now().UnixNano())
	c.health.mu.Unlock()
}

// isReply reports whether err is an answer from Redis: nil or an error
// reply. (Apart from noteReply so that err == nil, the common case, costs
// no allocation: errors.As takes the address of its target.)
func isReply(err error) bool {
	var re redis.Error
	return errors.Is(err, redis.Nil) || errors.As(err, &re)
}

// Reachable reports whether Redis can be reached, as far as one quick
// look tells: at once (nil) if the Conn has heard from Redis since its
// last failure, or heard from any of its servers within recentReply; else,
// where a PING can be bounded (pingable), by one PING on the shadow client,
// shared by the callers that ask meanwhile, each waiting at most
// pingTimeout. Only a refused connection (or another failure to dial) is
// returned, at once and naming why; a PING that is slow or answered with
// an error says nothing the call itself will not find out, and the call
// goes on.
func (c *Conn) Reachable(ctx context.Context) error {
	if c.health.answered() || time.Since(time.Unix(0, c.health.lastReply.Load())) < recentReply || !c.pingable() {
		return nil
	}
	c.health.mu.Lock()
	p := c.health.probing
	if p == nil {
		p = &probeCall{done: make(chan struct{})}
		c.health.probing = p
		if !c.spawn(func() { c.reachProbe(p) }) {
			c.health.probing = nil
			close(p.done) // closing: the call finds ErrClosed
		}
	}
	c.health.mu.Unlock()
	// The PING's own bound is go-redis's to keep; a caller waits no longer
	// than that bound whatever go-redis does.
	wait := time.NewTimer(pingTimeout)
	defer wait.Stop()
	select {
	case <-p.done:
		return p.err
	case <-wait.C:
		return nil // no answer yet proves nothing: the call goes on
	case <-ctx.Done():
		return nil // the caller's ctx ended: its call says so
	}
}

// recentReply: a reply heard this recently, from any server, shows Redis
// reachable enough to ask (see Reachable).
const recentReply = time.Second

// probeCall is Reachable's PING in flight, and, once done is closed, its
// finding: a failure to dial, or nil.
type probeCall struct {
	done chan struct{}
	err  error
}

// reachProbe runs p's PING and records what it found.
func (c *Conn) reachProbe(p *probeCall) {
	if err := c.ping(); refused(err) {
		p.err = err
	}
	c.health.mu.Lock()
	c.health.probing = nil
	c.health.mu.Unlock()
	close(p.done)
}

// LastErr is the last error that kept a command from Redis, if it came at
// or after since and Redis has not answered since; else nil.
func (c *Conn) LastErr(since time.Time) error {
	if c.health.answered() || c.health.lastFail.Load() < since.UnixNano() {
		return nil
	}
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	return c.health.err
}

// CtxErr is ctx's error for a call that began at since: wrapped with the
// last error that kept a command from Redis meanwhile, if Redis has not
// answered since, so that a caller whose ctx ran out on an unreachable
// Redis learns why (errors.Is still matches ctx's error).
// When no error is known but Redis has not replied to anything since the
// call began, one PING on the shadow client says whether it can be
// reached.
func (c *Conn) CtxErr(ctx context.Context, since time.Time) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	last := c.LastErr(since)
	if last == nil && c.health.lastReply.Load() < since.UnixNano() {
		last = c.ping()
	}
	if last != nil {
		return fmt.Errorf("%w (last Redis error: %v)", err, last)
	}
	return err
}

// pingTimeout bounds the shadow's PING (ping), and a caller's wait for
// it. A refusal comes within a round trip; a slower PING proves nothing.
const pingTimeout = 250 * time.Millisecond

// pingable reports whether the shadow's PING keeps its bound: not on a
// Cluster, whose client first loads the slot map, from any node, and does
// not always end that with the ctx (5 s, in 2 of 8 tries, with a master
// stopped by SIGSTOP; go-redis v9.23). A Cluster's calls find out for
// themselves.
func (c *Conn) pingable() bool {
	_, single := c.rdb.(*redis.Client)
	return single
}

// ping PINGs Redis on the shadow client (which does not retry) for at
// most pingTimeout: nil if it answered (or cannot be asked so), else why
// not.
func (c *Conn) ping() error {
	sh := c.shadow()
	if sh == nil || !c.pingable() {
		return nil // closed, or a Cluster
	}
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	err := sh.Ping(ctx).Err()
	switch {
	case err == nil:
		c.noteReply(nil)
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("no answer to a PING within %v", pingTimeout)
	}
	c.noteReply(err)
	return err
}

// refused reports whether err is a failure to connect (a refused
// connection, an unknown host).
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// dialFailed reports whether err is a failure to connect, or to get a
// connection from the pool: the command was never sent.
func dialFailed(err error) bool {
	return refused(err) || errors.Is(err, redis.ErrPoolTimeout)
}
