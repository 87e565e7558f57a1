package redistest

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestCmdParser(t *testing.T) {
	type piece struct {
		raw  string
		args []string // nil: the piece is no command
	}
	stream := []piece{
		{"*1\r\n$4\r\nPING\r\n", []string{"PING"}},
		{"*2\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n", []string{"SUBSCRIBE", "ch"}},
		{"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n", []string{"SET", "k", "a\r\nb"}},
		{"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", []string{"ECHO", ""}},
		{"*0\r\n", nil},
		{"ping  x\r\n", []string{"PING", "x"}},
	}
	in, want := "", []parsedCmd(nil) // want's ends are offsets in the whole stream
	for _, pc := range stream {
		in += pc.raw
		if pc.args != nil {
			want = append(want, parsedCmd{end: len(in), args: pc.args})
		}
	}
	// run feeds in in chunks cut at the given offsets and returns what the
	// parser found, with ends made absolute.
	run := func(cuts []int) []parsedCmd {
		var cp cmdParser
		var got []parsedCmd
		from := 0
		for _, to := range append(cuts, len(in)) {
			for _, c := range cp.feed([]byte(in[from:to])) {
				if c.end < 1 || c.end > to-from {
					t.Fatalf("cuts %v: end %d outside the chunk of %d bytes", cuts, c.end, to-from)
				}
				got = append(got, parsedCmd{end: from + c.end, args: c.args})
			}
			from = to
		}
		return got
	}
	check := func(cuts []int) {
		equal := func(a, b parsedCmd) bool { return a.end == b.end && slices.Equal(a.args, b.args) }
		if got := run(cuts); !slices.EqualFunc(got, want, equal) {
			t.Fatalf("cuts %v: got %v, want %v", cuts, got, want)
		}
	}
	check(nil)
	var each []int
	for i := 1; i < len(in); i++ {
		check([]int{i}) // every split point of a two-segment delivery
		each = append(each, i)
	}
	check(each) // one byte per read

	for _, bad := range []string{"*1\r\n$x\r\n", "*1\r\n$4\r\nPINGxx", "*1\r\n+PING\r\n", "*-1\r\n"} {
		var cp cmdParser
		if got := cp.feed([]byte(bad)); len(got) != 0 || !cp.broken {
			t.Fatalf("%q: got %v, broken=%v; want nothing and broken", bad, got, cp.broken)
		}
		if got := cp.feed([]byte(stream[0].raw)); len(got) != 0 {
			t.Fatalf("%q: a broken parser still found %v", bad, got)
		}
	}
}

// waitFor polls cond for up to 5s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

func subscribed(t *testing.T, c *redis.Client, channel string) *redis.PubSub {
	t.Helper()
	ps := c.Subscribe(context.Background(), channel)
	t.Cleanup(func() { _ = ps.Close() })
	if msg, err := ps.ReceiveTimeout(context.Background(), 5*time.Second); err != nil {
		t.Fatalf("SUBSCRIBE %s: %v", channel, err)
	} else if _, ok := msg.(*redis.Subscription); !ok {
		t.Fatalf("SUBSCRIBE %s: got %T %v, want a confirmation", channel, msg, msg)
	}
	return ps
}

func recvAs[T any](t *testing.T, ps *redis.PubSub) T {
	t.Helper()
	msg, err := ps.ReceiveTimeout(context.Background(), 5*time.Second)
	got, ok := msg.(T)
	if err != nil || !ok {
		t.Fatalf("pub/sub received %T %v, %v; want a %T", msg, msg, err, got)
	}
	return got
}

func isSub(ci ConnInfo) bool { return ci.Subscriber }

func incrK(args []string) bool { return len(args) == 2 && args[0] == "INCR" && args[1] == "k" }

func TestProxy(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(t *testing.T, s *Server, p *Proxy)
	}{
		{"forwards-and-counts", func(t *testing.T, s *Server, p *Proxy) {
			c := p.Client(t)
			mustPing(t, c)
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatalf("SET: %v", err)
			}
			conns := p.Conns()
			if len(conns) != 1 || conns[0].ID != 1 || conns[0].Subscriber || conns[0].Commands < 2 {
				t.Fatalf("Conns() = %+v; want one non-subscriber with ID 1 and at least PING and SET", conns)
			}
			if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
				t.Fatalf("GET = %q, %v; want v", got, err)
			}
			if got := p.Conns()[0].Commands; got != conns[0].Commands+1 {
				t.Fatalf("Commands went from %d to %d after one GET", conns[0].Commands, got)
			}
		}},
		{"raw-split-writes", func(t *testing.T, s *Server, p *Proxy) {
			conn, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			for _, part := range []string{"*1\r\n$4\r\nPI", "NG\r\n*2\r\n$9\r\nsubs", "cribe\r\n$2\r\nch\r\n"} {
				if _, err := io.WriteString(conn, part); err != nil {
					t.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond) // separate TCP segments, most likely separate reads
			}
			want := "+PONG\r\n*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
			got := make([]byte, len(want))
			if _, err := io.ReadFull(conn, got); err != nil || string(got) != want {
				t.Fatalf("replies %q, %v; want %q", got, err, want)
			}
			if conns := p.Conns(); len(conns) != 1 || conns[0].Commands != 2 || !conns[0].Subscriber {
				t.Fatalf("Conns() = %+v; want one subscriber that sent 2 commands", conns)
			}
		}},
		{"freeze-subscriber-then-thaw", func(t *testing.T, s *Server, p *Proxy) {
			c := p.Client(t)
			ps := subscribed(t, c, "ch")
			if n := p.Freeze(isSub); n != 1 {
				t.Fatalf("Freeze(subscribers) = %d; want 1", n)
			}
			// The other connection still works, and the server still has
			// the subscriber: only the proxy holds its bytes.
			if n, err := c.Publish(ctx, "ch", "m1").Result(); err != nil || n != 1 {
				t.Fatalf("PUBLISH while frozen = %d, %v; want 1 receiver", n, err)
			}
			if err := ps.Ping(ctx); err != nil {
				t.Fatalf("pub/sub PING write on a half-open connection: %v", err)
			}
			if msg, err := ps.ReceiveTimeout(ctx, 300*time.Millisecond); !isTimeout(err) {
				t.Fatalf("frozen pub/sub received %T %v, %v; want a timeout", msg, msg, err)
			}
			mustPing(t, c)
			p.Thaw()
			if m := recvAs[*redis.Message](t, ps); m.Payload != "m1" {
				t.Fatalf("after Thaw got message %q; want m1", m.Payload)
			}
			recvAs[*redis.Pong](t, ps)
		}},
		{"freeze-all-spares-new-conns", func(t *testing.T, s *Server, p *Proxy) {
			old := p.ClientWith(t, noRetry)
			mustPing(t, old)
			if n := p.Freeze(nil); n != 1 {
				t.Fatalf("Freeze(nil) = %d; want 1", n)
			}
			if err := old.Ping(ctx).Err(); !isTimeout(err) {
				t.Fatalf("PING on a frozen connection: %v; want a timeout", err)
			}
			mustPing(t, p.ClientWith(t, noRetry))
			if conns := p.Conns(); len(conns) != 2 {
				t.Fatalf("Conns() = %+v; want the frozen connection still open and the new one", conns)
			}
			p.Thaw()
			mustPing(t, old)
		}},
		{"cut-fails-in-flight-command", func(t *testing.T, s *Server, p *Proxy) {
			c := p.ClientWith(t, noRetry)
			mustPing(t, c)
			sent := p.Conns()[0].Commands
			done := make(chan error, 1)
			go func() { done <- c.BLPop(ctx, 10*time.Second, "list").Err() }()
			raw, err := net.Dial("tcp", p.Addr()) // shows the reset, which go-redis reports as EOF
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			if _, err := io.WriteString(raw, "*3\r\n$5\r\nBLPOP\r\n$4\r\nlist\r\n$2\r\n10\r\n"); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "both BLPOPs reached the proxy", func() bool {
				conns := p.Conns()
				return len(conns) == 2 && conns[0].Commands > sent && conns[1].Commands == 1
			})
			start := time.Now()
			if n := p.Cut(nil); n != 2 {
				t.Fatalf("Cut(nil) = %d; want 2", n)
			}
			if err := <-done; err == nil || errors.Is(err, redis.Nil) || time.Since(start) > 2*time.Second {
				t.Fatalf("BLPOP on a cut connection: %v after %v; want an error at once", err, time.Since(start))
			}
			_ = raw.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := raw.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("raw read on a cut connection: %v; want connection reset", err)
			}
			mustPing(t, c) // the pool dials a new connection
			if conns := p.Conns(); len(conns) != 1 || conns[0].ID != 3 {
				t.Fatalf("Conns() = %+v; want only the new connection 3", conns)
			}
		}},
		{"cut-subscriber-resubscribes", func(t *testing.T, s *Server, p *Proxy) {
			c := p.Client(t)
			ps := subscribed(t, c, "ch")
			if n := p.Cut(isSub); n != 1 {
				t.Fatalf("Cut(subscribers) = %d; want 1", n)
			}
			if msg, err := ps.ReceiveTimeout(ctx, 5*time.Second); err == nil || isTimeout(err) {
				t.Fatalf("pub/sub on a cut connection received %T %v, %v; want a connection error", msg, msg, err)
			}
			recvAs[*redis.Subscription](t, ps) // go-redis redialled and subscribed again
			if n := c.Publish(ctx, "ch", "m2").Val(); n != 1 {
				t.Fatalf("PUBLISH reached %d subscribers; want 1", n)
			}
			if m := recvAs[*redis.Message](t, ps); m.Payload != "m2" {
				t.Fatalf("got message %q; want m2", m.Payload)
			}
		}},
		{"cut-after-incr-retried-applies-twice", func(t *testing.T, s *Server, p *Proxy) {
			fired := p.CutAfter(incrK)
			c := p.Client(t) // MaxRetries 3: go-redis re-sends INCR after the EOF
			if v, err := c.Incr(ctx, "k").Result(); err != nil || v != 2 {
				t.Fatalf("INCR = %d, %v; want 2: the first INCR ran, its reply was lost, the retry ran again", v, err)
			}
			<-fired // closed already; a hang here fails the test by timeout
			if got := s.Client(t).Get(ctx, "k").Val(); got != "2" {
				t.Fatalf("k = %q on the server; want 2", got)
			}
			if v, err := c.Incr(ctx, "k").Result(); err != nil || v != 3 {
				t.Fatalf("second INCR = %d, %v; want 3 (CutAfter applies once)", v, err)
			}
		}},
		{"cut-after-incr-no-retry", func(t *testing.T, s *Server, p *Proxy) {
			fired := p.CutAfter(incrK)
			c := p.ClientWith(t, func(o *redis.Options) { o.MaxRetries = -1 })
			mustPing(t, c)
			if err := c.Incr(ctx, "k").Err(); !errors.Is(err, io.EOF) {
				t.Fatalf("INCR: %v; want EOF", err)
			}
			select {
			case <-fired:
			default:
				t.Fatal("CutAfter's channel is open after it cut the connection")
			}
			if got := s.Client(t).Get(ctx, "k").Val(); got != "1" {
				t.Fatalf("k = %q on the server; want 1: the INCR ran though its client saw an error", got)
			}
		}},
		{"close-while-frozen", func(t *testing.T, s *Server, p *Proxy) {
			c := p.ClientWith(t, noRetry)
			mustPing(t, c)
			p.Freeze(nil)
			p.Close() // must not hang on the held pumps
			if conns := p.Conns(); len(conns) != 0 {
				t.Fatalf("Conns() after Close = %+v", conns)
			}
			if err := c.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "refused") {
				t.Fatalf("PING after Close: %v; want connection refused", err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := Start(t)
			tc.run(t, s, NewProxy(t, s.Addr()))
		})
	}
}
