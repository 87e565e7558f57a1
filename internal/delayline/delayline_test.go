package delayline

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair is a loopback TCP connection: the end the test wraps and its peer.
func pair(t *testing.T) (near, far net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	near, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	far = <-accepted
	if far == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { near.Close(); far.Close() })
	return near, far
}

func fixed(d time.Duration) func() time.Duration { return func() time.Duration { return d } }

func TestReadsArriveLateAndInOrder(t *testing.T) {
	tests := []struct {
		name   string
		delays []time.Duration // the delay as each chunk enters the line
		least  time.Duration   // the last chunk may not arrive sooner
	}{
		{"fixed delay", []time.Duration{30 * time.Millisecond, 30 * time.Millisecond}, 30 * time.Millisecond},
		{"a shrinking delay keeps order", []time.Duration{60 * time.Millisecond, 0}, 60 * time.Millisecond},
		{"no delay", []time.Duration{0, 0}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			near, far := pair(t)
			var i atomic.Int32
			c := New(near, Delays{Read: func() time.Duration { return tc.delays[min(int(i.Add(1))-1, len(tc.delays)-1)] }})
			start := time.Now()
			for _, b := range []string{"first.", "second."} {
				if _, err := far.Write([]byte(b)); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Millisecond) // two chunks, not one
			}
			got := make([]byte, 0, 13)
			buf := make([]byte, 64)
			for len(got) < len("first.second.") {
				n, err := c.Read(buf)
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				got = append(got, buf[:n]...)
			}
			if string(got) != "first.second." {
				t.Fatalf("read %q, want %q", got, "first.second.")
			}
			if took := time.Since(start); took < tc.least {
				t.Fatalf("all bytes read after %v, want at least %v", took, tc.least)
			}
		})
	}
}

func TestReadDeadlineTimesOut(t *testing.T) {
	near, far := pair(t)
	c := New(near, Delays{Read: fixed(200 * time.Millisecond)})
	if _, err := far.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := c.Read(make([]byte, 8))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read before the bytes are due: %v, want a timeout", err)
	}
	_ = c.SetReadDeadline(time.Time{})
	buf := make([]byte, 8)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "late" {
		t.Fatalf("read after clearing the deadline: %q, %v", buf[:n], err)
	}
}

func TestWritesDoNotWaitForTheLine(t *testing.T) {
	near, far := pair(t)
	c := New(near, Delays{Write: fixed(80 * time.Millisecond)})
	t.Cleanup(func() { c.Close() })
	start := time.Now()
	for _, b := range []string{"a", "b", "c"} {
		if _, err := c.Write([]byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took > 40*time.Millisecond {
		t.Fatalf("three writes took %v: a write waited for the line", took)
	}
	got, err := io.ReadAll(io.LimitReader(far, 3))
	if err != nil || !bytes.Equal(got, []byte("abc")) {
		t.Fatalf("peer read %q, %v", got, err)
	}
	if took := time.Since(start); took < 80*time.Millisecond {
		t.Fatalf("peer got the bytes after %v, want at least 80ms", took)
	}
}

func TestCloseEndsTheLines(t *testing.T) {
	near, far := pair(t)
	c := New(near, Delays{Read: fixed(time.Millisecond), Write: fixed(time.Millisecond)})
	if _, err := far.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	buf := make([]byte, 8)
	for {
		if _, err := c.Read(buf); err != nil {
			break // the queued byte may come first; then the error
		}
	}
	if _, err := c.Write([]byte("y")); err == nil {
		t.Fatal("a write after Close succeeded")
	}
}

func TestOnSubscribeDelaysOnlyASubscriber(t *testing.T) {
	near, far := pair(t)
	c := OnSubscribe(near, fixed(60*time.Millisecond))
	t.Cleanup(func() { c.Close() })
	roundTrip := func(cmd string) time.Duration {
		start := time.Now()
		if _, err := c.Write([]byte(cmd)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		n, err := far.Read(buf)
		if err != nil || string(buf[:n]) != cmd {
			t.Fatalf("peer read %q, %v", buf[:n], err)
		}
		if _, err := far.Write([]byte("+OK\r\n")); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Read(buf); err != nil || string(buf[:n]) != "+OK\r\n" {
			t.Fatalf("read %q, %v", buf[:n], err)
		}
		return time.Since(start)
	}
	if d := roundTrip("*1\r\n$4\r\nPING\r\n"); d > 40*time.Millisecond {
		t.Fatalf("a command connection's reply took %v", d)
	}
	if d := roundTrip("*2\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n"); d < 60*time.Millisecond {
		t.Fatalf("a subscriber's reply took %v, want at least the 60ms line", d)
	}
}
