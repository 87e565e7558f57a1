package lockactor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockactor/lockactor/actors"
	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// await sends m to key's actor and waits for the answer, for ctx to end, for
// the wait bound (expired) or for Close, whichever comes first. It returns
// the actor's Result, or the error that ended the wait unwrapped (the caller
// adds the name). The Request decides races: if the actor answered before the
// caller withdrew, a grant is kept when the wait bound ran out (the caller
// did get it in time) and handed to giveBack when ctx ended (the caller must
// hold nothing).
func (c *Client) await(ctx context.Context, key actors.Key, m *messages.Acquire, expired <-chan time.Time, giveBack func()) (messages.Result, error) {
	start := time.Now()
	if err := c.reachable(ctx); err != nil {
		return messages.Result{}, err
	}
	send := func(msg any) error { return c.rt.Send(key, msg) }
	res, err := await(ctx, send, c.done, m, expired, giveBack)
	return res, c.named(ctx, start, err)
}

// reachable checks, when the Client has not heard from Redis since its last
// failure (or ever), that Redis can be reached, with one PING that is not
// retried: an unreachable Redis fails the call at once, naming why, rather
// than after go-redis's retries or, to a waiting caller, never.
func (c *Client) reachable(ctx context.Context) error {
	if io := c.rt.IO(); io != nil {
		return io.Reachable(ctx)
	}
	return nil
}

// named is err, what ended a wait that began at start; when that was ctx,
// the error names the last Redis error if Redis could not be reached
// meanwhile (redisio.CtxErr).
func (c *Client) named(ctx context.Context, start time.Time, err error) error {
	if err == nil || ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
		return err
	}
	if io := c.rt.IO(); io != nil {
		return io.CtxErr(ctx, start)
	}
	return err
}

// await is Client.await for any destination: send delivers to the actor,
// done is closed when its Client closes.
func await(ctx context.Context, send func(any) error, done <-chan struct{}, m *messages.Acquire, expired <-chan time.Time, giveBack func()) (messages.Result, error) {
	if err := send(m); err != nil {
		return messages.Result{}, ErrClosed
	}
	var cause error
	select {
	case <-m.Req.Done():
		return m.Req.Result(), nil
	case <-ctx.Done():
		cause = ctx.Err()
	case <-expired:
	case <-done:
		m.Req.Abandon()
		return messages.Result{}, ErrClosed
	}
	if m.Req.Abandon() {
		_ = send(&messages.Abandon{Owner: m.Owner, Req: m.Req}) // lets the actor drop it early
		return messages.Result{}, cause
	}
	<-m.Req.Done()
	res := m.Req.Result()
	if cause != nil {
		if res.Granted {
			giveBack()
		}
		return messages.Result{}, cause
	}
	return res, nil
}

// release sends m to key's actor and waits for its answer (awaitRelease); a
// wait that ctx ended names the last Redis error if Redis could not be
// reached meanwhile.
func (c *Client) release(ctx context.Context, send func(any) error, m *messages.Release) (messages.ReleaseResult, error) {
	start := time.Now()
	res, err := awaitRelease(ctx, send, c.done, m)
	return res, c.named(ctx, start, err)
}

// awaitRelease sends a Release that carries its own reply channel and waits
// for the answer, for ctx to end or for Close. Errors come back unwrapped
// (the caller adds the name).
func awaitRelease(ctx context.Context, send func(any) error, done <-chan struct{}, m *messages.Release) (messages.ReleaseResult, error) {
	m.Reply = make(chan messages.ReleaseResult, 1)
	return awaitReply(ctx, send, done, m, m.Reply)
}

// awaitReply sends msg, which carries reply, and waits for the answer on
// reply, for ctx to end or for Close. Errors come back unwrapped: ErrClosed
// or ctx's (the caller adds the name).
func awaitReply[R any](ctx context.Context, send func(any) error, done <-chan struct{}, msg any, reply <-chan R) (R, error) {
	var zero R
	if err := send(msg); err != nil {
		return zero, ErrClosed
	}
	select {
	case res := <-reply:
		return res, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-done:
		return zero, ErrClosed
	}
}

// releaseErr is what a release call returns for the actor's answer res,
// or for err, what ended the wait (ErrClosed, or the ctx's error): nil, or
// an error naming k and name. An error while the release goes on in the
// background also matches ErrReleasePending.
func releaseErr(k kind, name string, res messages.ReleaseResult, err error) error {
	switch {
	case errors.Is(err, ErrClosed):
		return k.err(name, err)
	case err != nil:
		return k.err(name, fmt.Errorf("%w: %w", ErrReleasePending, err))
	case res.Err != nil && res.Pending:
		return k.err(name, fmt.Errorf("%w: %w", ErrReleasePending, res.Err))
	case res.Err != nil:
		return k.err(name, res.Err)
	case res.NotHeld:
		return k.err(name, ErrNotHeld)
	}
	return nil
}

// guarded runs fn on the Client's Redis connection, returning when ctx ends
// even on a hung server (redisio.Guard), and names the kind and name in its
// error. It is for calls that change no actor state: queries, force unlock,
// permits.
func guarded[T any](ctx context.Context, c *Client, k kind, name string, fn func(context.Context, *redisio.Conn) (T, error)) (T, error) {
	io := c.rt.IO()
	v, err := redisio.Guard(ctx, io, func(ctx context.Context) (T, error) { return fn(ctx, io) })
	if err != nil {
		var zero T
		return zero, k.err(name, err)
	}
	return v, nil
}
