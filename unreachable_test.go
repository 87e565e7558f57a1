package lockactor_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// closedPort is a loopback address nobody listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// An unreachable Redis is not a busy lock: with a wrong address every call
// fails within about a second naming the refused connection (before, a
// single-attempt TryLock took 10s to say so, and a Lock or TryLock whose
// ctx ended first said only "context deadline exceeded"). The Client uses
// go-redis's default options: its retries are not ours to count on.
func TestUnreachableRedisNamesTheCause(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: closedPort(t)})
	t.Cleanup(func() { rdb.Close() })
	c := newClient(t, rdb)
	tests := []struct {
		name string
		ctx  time.Duration
		call func(ctx context.Context) error
	}{
		{"TryLock", 10 * time.Second, func(ctx context.Context) error { _, err := c.Lock("x").TryLock(ctx); return err }},
		{"TryLock, 2s ctx", 2 * time.Second, func(ctx context.Context) error { _, err := c.Lock("x").TryLock(ctx); return err }},
		{"Lock, 10s ctx", 10 * time.Second, func(ctx context.Context) error { return c.Lock("x").Lock(ctx) }},
		{"Mutex Lock", 10 * time.Second, func(ctx context.Context) error { return c.Mutex("x").Lock(ctx) }},
		{"FairLock TryLock with a wait", 10 * time.Second, func(ctx context.Context) error {
			_, err := c.FairLock("x").TryLock(ctx, lockactor.WithWait(5*time.Second))
			return err
		}},
		{"Semaphore TryAcquire", 10 * time.Second, func(ctx context.Context) error { _, err := c.Semaphore("s").TryAcquire(ctx, 1, 0); return err }},
		{"PermitSemaphore Acquire", 10 * time.Second, func(ctx context.Context) error {
			_, err := c.PermitSemaphore("p").Acquire(ctx, time.Second)
			return err
		}},
		{"CountDownLatch CountDown", 10 * time.Second, func(ctx context.Context) error { return c.CountDownLatch("l").CountDown(ctx) }},
		{"CountDownLatch Await", 10 * time.Second, func(ctx context.Context) error { return c.CountDownLatch("l").Await(ctx) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.ctx)
			defer cancel()
			start := time.Now()
			err := tc.call(ctx)
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), "connection refused") {
				t.Fatalf("error %v after %v, want it to name the refused connection", err, took)
			}
			if took > 1500*time.Millisecond {
				t.Fatalf("took %v to fail: %v", took, err)
			}
		})
	}
}

// A call whose ctx ends while Redis cannot be reached says why: its error
// matches the ctx's and names the last Redis error. Here the server was
// there when the Client began, and stops answering (SIGSTOP) while a Lock
// waits behind another Client's hold.
func TestCtxEndNamesTheLastRedisError(t *testing.T) {
	srv := redistest.Start(t)
	if srv.Embedded() {
		t.Skip("needs a real redis-server (SIGSTOP): apt-get install -y redis-server")
	}
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 10*time.Second)
	if err := c.Lock("ctx-cause").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Pause(t)
	defer srv.Resume(t)
	lctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err := c.Lock("ctx-cause").Lock(lctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "last Redis error") {
		t.Fatalf("Lock on a stopped server = %v; want DeadlineExceeded naming the last Redis error", err)
	}
}
