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

// What the Conn last heard from Redis: whether the servers answered since
// the last error that kept a command from them (a refused or broken
// connection, a timeout), and that error. An acquisition on a Client that
// has not heard from Redis since checks first that it can (Reachable), so
// that an unreachable Redis fails the call at once, naming why, rather
// than looking like a busy lock; and a call that ends with its ctx while
// Redis could not be reached names the last error (LastErr).
type health struct {
	answered  atomic.Bool  // a reply came since the last failure
	lastReply atomic.Int64 // when the last reply came, UnixNano

	mu      sync.Mutex
	err     error // the last failure
	errAt   time.Time
	probing *probeCall // Reachable's PING in flight
}

// noteReply records what a command's outcome says of the connection: a
// reply (an error reply too) means Redis answered.
func (c *Conn) noteReply(err error) {
	var re redis.Error
	switch {
	case err == nil || errors.Is(err, redis.Nil) || errors.As(err, &re):
		if !c.health.answered.Load() {
			c.health.answered.Store(true)
		}
		c.health.lastReply.Store(time.Now().UnixNano())
		return
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, ErrClosed), errors.Is(err, ErrStale), errors.Is(err, ErrPending):
		return // the caller's doing, or no command at all: nothing heard
	}
	c.health.mu.Lock()
	c.health.err, c.health.errAt = err, time.Now()
	c.health.mu.Unlock()
	c.health.answered.Store(false)
}

// Reachable reports whether Redis can be reached, as far as one quick
// look tells: at once (nil) if the Conn has heard from Redis since its
// last failure, or heard from any of its servers within recentReply; else,
// on a single server or a Sentinel group (not a Cluster), by one PING on
// the shadow client, which does not retry, shared by the
// callers that ask meanwhile and bounded by reachTimeout. Only a failure to
// connect (a refused connection, an unknown host) is returned, at once and
// naming why; a PING that is slow or answered with an error says nothing
// the call itself will not find out, and the call goes on.
func (c *Conn) Reachable(ctx context.Context) error {
	if c.health.answered.Load() || time.Since(time.Unix(0, c.health.lastReply.Load())) < recentReply {
		return nil
	}
	if _, single := c.rdb.(*redis.Client); !single {
		// A Cluster client's PING first loads the slot map, from any node,
		// and go-redis does not always end that with the ctx (5 s, once in
		// a few tries, with a master stopped by SIGSTOP): a Cluster's calls
		// find out for themselves.
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
	// than that bound whatever go-redis does (a Cluster's shadow may first
	// load its slot map from a stopped node).
	wait := time.NewTimer(reachTimeout)
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

// reachTimeout bounds the PING of Reachable. A refusal comes within a
// round trip; a PING slower than this proves nothing, and the call goes on.
const reachTimeout = 250 * time.Millisecond

// probeCall is Reachable's PING in flight, and, once done is closed, its
// finding: a failure to connect, or nil.
type probeCall struct {
	done chan struct{}
	err  error
}

// reachProbe runs p's PING and records what it found.
func (c *Conn) reachProbe(p *probeCall) {
	defer func() {
		c.health.mu.Lock()
		c.health.probing = nil
		c.health.mu.Unlock()
		close(p.done)
	}()
	sh := c.shadow()
	if sh == nil {
		return // no way to ask without retries: let the call find out
	}
	ctx, cancel := context.WithTimeout(context.Background(), reachTimeout)
	defer cancel()
	err := sh.Ping(ctx).Err()
	c.noteReply(err)
	if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
		p.err = err
	}
}

// LastErr is the last error that kept a command from Redis, if it came at
// or after since and Redis has not answered since; else nil.
func (c *Conn) LastErr(since time.Time) error {
	if c.health.answered.Load() {
		return nil
	}
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	if c.health.err == nil || c.health.errAt.Before(since) {
		return nil
	}
	return c.health.err
}

// CtxErr is ctx's error for a call that began at since: wrapped with the
// last error that kept a command from Redis meanwhile, if Redis has not
// answered since, so that a caller whose ctx ran out on an unreachable
// Redis learns why (errors.Is still matches ctx's error).
// When no error is known but Redis has not replied to anything since the
// call began, one PING on the shadow client (at most silenceProbe) says
// whether it can be reached.
func (c *Conn) CtxErr(ctx context.Context, since time.Time) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	last := c.LastErr(since)
	if last == nil && c.health.lastReply.Load() < since.UnixNano() {
		last = c.probe()
	}
	if last != nil {
		return fmt.Errorf("%w (last Redis error: %v)", err, last)
	}
	return err
}

// silenceProbe bounds the PING CtxErr sends to a silent Redis.
const silenceProbe = 250 * time.Millisecond

// probe PINGs Redis on the shadow client for at most silenceProbe: nil if
// it answered, else why not.
func (c *Conn) probe() error {
	if _, single := c.rdb.(*redis.Client); !single {
		return nil // a Cluster's PING may outlast its ctx: see Reachable
	}
	sh := c.shadow()
	if sh == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), silenceProbe)
	defer cancel()
	err := sh.Ping(ctx).Err()
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("no answer to a PING within %v", silenceProbe)
	}
	c.noteReply(err)
	return err
}

// dialFailed reports whether err is a failure to connect: the command was
// never sent.
func dialFailed(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, redis.ErrPoolTimeout)
}
