package lockactor

import (
	"context"
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
	send := func(msg any) error { return c.rt.Send(key, msg) }
	return await(ctx, send, c.done, m, expired, giveBack)
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
