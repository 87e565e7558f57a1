// Package delayline puts delay lines on a net.Conn: what arrives from the
// peer, and optionally what is written to it, is passed on a settable time
// late, in order, and a Write never waits for the line, so a pipelining
// client keeps pipelining. OnSubscribe delays only what a Redis connection
// reads once it subscribes: the torture suite's slow pub/sub connections.
// Dialer wraps every connection a go-redis client dials.
//
// It must never reorder or drop bytes: a delay that shrinks while bytes are
// in the line makes later bytes wait for the earlier ones.
package delayline

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Delays says how late each direction runs. Each function is asked once
// per chunk, as the chunk enters the line, and may return 0; a nil
// function means no delay line at all in that direction.
type Delays struct {
	Read  func() time.Duration // bytes from the peer
	Write func() time.Duration // bytes to the peer
}

// Conn is a net.Conn whose directions run through delay lines.
type Conn struct {
	net.Conn
	in  *line // nil: reads pass straight through
	out *line // nil: writes pass straight through

	mu        sync.Mutex
	rDeadline time.Time
	wake      chan struct{} // a new chunk arrived or the deadline moved
}

// chunk is bytes in a line and when they may leave it.
type chunk struct {
	data []byte
	due  time.Time
}

// line is one direction: chunks in order, each due no earlier than the one
// before it.
type line struct {
	delay   func() time.Duration
	mu      sync.Mutex
	q       []chunk
	lastDue time.Time
	err     error         // the end of the line (the source failed)
	more    chan struct{} // signalled on every push and at the end
}

func newLine(delay func() time.Duration) *line {
	return &line{delay: delay, more: make(chan struct{}, 1)}
}

// push appends a copy of b, due after the line's delay (never before the
// chunk ahead of it).
func (l *line) push(b []byte) {
	now := time.Now()
	l.mu.Lock()
	due := now.Add(l.delay())
	if due.Before(l.lastDue) {
		due = l.lastDue
	}
	l.lastDue = due
	l.q = append(l.q, chunk{data: append([]byte(nil), b...), due: due})
	l.mu.Unlock()
	l.signal()
}

// end marks the line as ended by err once what it holds has left.
func (l *line) end(err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.mu.Unlock()
	l.signal()
}

func (l *line) signal() {
	select {
	case l.more <- struct{}{}:
	default:
	}
}

// take copies what is due into p: n > 0, or the line's error once empty,
// or how long until the head is due (wait < 0: nothing is queued).
func (l *line) take(p []byte, now time.Time) (n int, wait time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.q) == 0 {
		if l.err != nil {
			return 0, 0, l.err
		}
		return 0, -1, nil
	}
	h := &l.q[0]
	if now.Before(h.due) {
		return 0, h.due.Sub(now), nil
	}
	n = copy(p, h.data)
	h.data = h.data[n:]
	if len(h.data) == 0 {
		l.q[0] = chunk{}
		l.q = l.q[1:]
	}
	return n, 0, nil
}

// New wraps c. With d.Read set, a goroutine reads c for as long as it is
// open; with d.Write set, another writes to it. Both end when c is closed.
func New(c net.Conn, d Delays) *Conn {
	dc := &Conn{Conn: c, wake: make(chan struct{}, 1)}
	if d.Read != nil {
		dc.in = newLine(d.Read)
		go dc.pumpIn()
	}
	if d.Write != nil {
		dc.out = newLine(d.Write)
		go dc.pumpOut()
	}
	return dc
}

// pumpIn moves what the peer sends into the read line.
func (c *Conn) pumpIn() {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Conn.Read(buf)
		if n > 0 {
			c.in.push(buf[:n])
		}
		if err != nil {
			c.in.end(err)
			return
		}
	}
}

// pumpOut writes each chunk of the write line to the peer once it is due.
// A failed write ends the line: later Writes return its error.
func (c *Conn) pumpOut() {
	buf := make([]byte, 32<<10)
	for {
		n, wait, err := c.out.take(buf, time.Now())
		switch {
		case err != nil:
			return
		case n > 0:
			if _, werr := c.Conn.Write(buf[:n]); werr != nil {
				c.out.end(werr)
				return
			}
		case wait < 0:
			<-c.out.more
		default:
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-c.out.more:
				t.Stop()
			}
		}
	}
}

// Read returns bytes whose delay has passed, waiting for them until the
// read deadline (then os.ErrDeadlineExceeded, a net.Error that times out).
func (c *Conn) Read(p []byte) (int, error) {
	if c.in == nil {
		return c.Conn.Read(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		now := time.Now()
		n, wait, err := c.in.take(p, now)
		if n > 0 || err != nil {
			return n, err
		}
		c.mu.Lock()
		deadline := c.rDeadline
		c.mu.Unlock()
		if !deadline.IsZero() {
			left := deadline.Sub(now)
			if left <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			if wait < 0 || left < wait {
				wait = left
			}
		}
		c.sleep(wait)
	}
}

// sleep waits for d (d < 0: until woken), a new chunk, or a moved deadline.
func (c *Conn) sleep(d time.Duration) {
	if d < 0 {
		select {
		case <-c.in.more:
		case <-c.wake:
		}
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.in.more:
	case <-c.wake:
	}
}

// Write queues p on the write line and returns at once; with no write
// line it writes through. After the line failed it returns that error.
func (c *Conn) Write(p []byte) (int, error) {
	if c.out == nil {
		return c.Conn.Write(p)
	}
	c.out.mu.Lock()
	err := c.out.err
	c.out.mu.Unlock()
	if err != nil {
		return 0, err
	}
	c.out.push(p)
	return len(p), nil
}

// Close closes the connection; both lines end with it.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	if c.out != nil {
		c.out.end(net.ErrClosed)
	}
	return err
}

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline bounds the wait of Read: a delayed connection keeps its
// own reader running, so the deadline is kept here.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.in == nil {
		return c.Conn.SetReadDeadline(t)
	}
	c.mu.Lock()
	c.rDeadline = t
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

// SetWriteDeadline applies to writes that pass straight through; a Write
// into a write line never waits, so it has nothing to bound there.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if c.out != nil {
		return nil
	}
	return c.Conn.SetWriteDeadline(t)
}

// OnSubscribe wraps a Redis connection so that from its first SUBSCRIBE,
// SSUBSCRIBE or PSUBSCRIBE on, what it reads runs through a delay line of
// delay: a subscriber connection slower than the command connections
// beside it. Until then it is raw itself (SyscallConn included, so
// go-redis's pool checks see the socket as before).
func OnSubscribe(raw net.Conn, delay func() time.Duration) net.Conn {
	c := &subConn{raw: raw, delay: delay}
	c.cur.Store(&raw)
	return c
}

type subConn struct {
	raw   net.Conn
	cur   atomic.Pointer[net.Conn] // raw, then its delay line
	delay func() time.Duration
	on    sync.Once
	moved atomic.Bool // the reads run through the delay line
}

func (c *subConn) conn() net.Conn { return *c.cur.Load() }

// Write notices the first subscription and moves the reads onto the delay
// line before it goes out: go-redis reads nothing between its writes and
// the replies they ask for, so no read is in progress on raw then.
func (c *subConn) Write(p []byte) (int, error) {
	if !c.moved.Load() && subscribes(p) {
		c.on.Do(func() {
			line := net.Conn(New(c.raw, Delays{Read: c.delay}))
			c.cur.Store(&line)
			c.moved.Store(true)
		})
	}
	return c.conn().Write(p)
}

// subscribes reports whether p holds a SUBSCRIBE, SSUBSCRIBE or
// PSUBSCRIBE (go-redis writes them in lower case; redis-cli in upper).
func subscribes(p []byte) bool {
	return bytes.Contains(p, []byte("subscribe\r\n")) || bytes.Contains(p, []byte("SUBSCRIBE\r\n"))
}

// Dialer returns a go-redis Options.Dialer that dials TCP and hands each
// connection to wrap (New or OnSubscribe with the delays a test wants).
func Dialer(wrap func(net.Conn) net.Conn) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return wrap(conn), nil
	}
}

func (c *subConn) Read(p []byte) (int, error)         { return c.conn().Read(p) }
func (c *subConn) Close() error                       { return c.conn().Close() }
func (c *subConn) LocalAddr() net.Addr                { return c.raw.LocalAddr() }
func (c *subConn) RemoteAddr() net.Addr               { return c.raw.RemoteAddr() }
func (c *subConn) SetDeadline(t time.Time) error      { return c.conn().SetDeadline(t) }
func (c *subConn) SetReadDeadline(t time.Time) error  { return c.conn().SetReadDeadline(t) }
func (c *subConn) SetWriteDeadline(t time.Time) error { return c.conn().SetWriteDeadline(t) }

// SyscallConn is raw's, for go-redis's pool checks.
func (c *subConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.raw.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.New("delayline: no syscall connection")
}
