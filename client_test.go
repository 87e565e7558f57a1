package lockactor_test

// Client's contract across kinds: Close, bad input, what is logged.

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestCloseWakesWaitersWithErrClosed(t *testing.T) {
	srv := redistest.Start(t)
	holder := newClient(t, srv.Client(t)).Lock("closing")
	ctx := ctxFor(t, 10*time.Second)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := lockactor.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		l := c.Lock("closing")
		go func() { errs <- l.Lock(ctx) }()
	}
	time.Sleep(100 * time.Millisecond)
	_ = c.Close()
	for i := 0; i < n; i++ {
		select {
		case err := <-errs:
			if !errors.Is(err, lockactor.ErrClosed) {
				t.Fatalf("waiter after Close = %v, want ErrClosed", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("waiter still blocked after Close")
		}
	}
	if err := c.Lock("closing").Unlock(ctx); !errors.Is(err, lockactor.ErrClosed) {
		t.Fatalf("call after Close = %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

func TestBadInput(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := newClient(t, rdb)
	ctx := ctxFor(t, 10*time.Second)
	var nilCtx context.Context
	tests := []struct {
		name string
		call func() error
	}{
		{"empty name Lock", func() error { return c.Lock("").Lock(ctx) }},
		{"empty name TryLock", func() error { _, err := c.Lock("").TryLock(ctx); return err }},
		{"empty name Unlock", func() error { return c.Lock("").Unlock(ctx) }},
		{"empty name ForceUnlock", func() error { _, err := c.Lock("").ForceUnlock(ctx); return err }},
		{"empty name IsLocked", func() error { _, err := c.Lock("").IsLocked(ctx); return err }},
		{"empty name HoldCount", func() error { _, err := c.Lock("").HoldCount(ctx); return err }},
		{"empty name RemainingLease", func() error { _, err := c.Lock("").RemainingLease(ctx); return err }},
		{"negative lease", func() error { return c.Lock("x").Lock(ctx, lockactor.WithLease(-time.Second)) }},
		{"negative wait", func() error { _, err := c.Lock("x").TryLock(ctx, lockactor.WithWait(-1)); return err }},
		{"nil ctx Lock", func() error { return c.Lock("x").Lock(nilCtx) }},
		{"nil ctx TryLock", func() error { _, err := c.Lock("x").TryLock(nilCtx); return err }},
		{"nil ctx Unlock", func() error { return c.Lock("x").Unlock(nilCtx) }},
		{"nil ctx IsHeldByMe", func() error { _, err := c.Lock("x").IsHeldByMe(nilCtx); return err }},
		{"New(nil)", func() error { _, err := lockactor.New(nil); return err }},
		{"New(typed nil)", func() error { var r *redis.Client; _, err := lockactor.New(r); return err }},
		{"zero watchdog", func() error { _, err := lockactor.New(rdb, lockactor.WithWatchdogTimeout(0)); return err }},
		{"negative watchdog", func() error { _, err := lockactor.New(rdb, lockactor.WithWatchdogTimeout(-time.Second)); return err }},
	}
	before := commandsProcessed(t, rdb)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, lockactor.ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
		})
	}
	// INFO itself is the one command between the two readings.
	if after := commandsProcessed(t, rdb); after != before+1 {
		t.Fatalf("bad input sent %d commands to Redis", after-before-1)
	}
	if err := c.Lock("x").Lock(ctx, lockactor.WithLease(-1)); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("error %v does not name the lock", err)
	}
}

func TestLoggerGetsLostLocksNotActorChatter(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const wd = 600 * time.Millisecond
	l := newClient(t, srv.Client(t), lockactor.WithLogger(log), lockactor.WithWatchdogTimeout(wd)).Lock("logged")
	ctx := ctxFor(t, 10*time.Second)
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, "logged")
	<-l.Lost()
	out := buf.String()
	if !strings.Contains(out, "lock lost") || !strings.Contains(out, "logged") {
		t.Fatalf("log lacks the lost lock:\n%s", out)
	}
	if strings.Contains(out, "actor system started") {
		t.Fatalf("protoactor's INFO chatter reached the logger:\n%s", out)
	}
}

func TestFamilyBadInput(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 10*time.Second)
	var nilCtx context.Context
	sem := c.Semaphore("s")
	tests := map[string]func() error{
		"FairLock empty name":      func() error { return c.FairLock("").Lock(ctx) },
		"FencedLock empty name":    func() error { return c.FencedLock("").Lock(ctx) },
		"ReadLock empty name":      func() error { return c.ReadWriteLock("").ReadLock().Lock(ctx) },
		"WriteLock empty name":     func() error { _, err := c.ReadWriteLock("").WriteLock().TryLock(ctx); return err },
		"FairLock negative wait":   func() error { _, err := c.FairLock("f").TryLock(ctx, lockactor.WithWait(-1)); return err },
		"Semaphore empty name":     func() error { return c.Semaphore("").Acquire(ctx, 1) },
		"Acquire 0":                func() error { return sem.Acquire(ctx, 0) },
		"Acquire -1":               func() error { return sem.Acquire(ctx, -1) },
		"TryAcquire 0":             func() error { _, err := sem.TryAcquire(ctx, 0, 0); return err },
		"TryAcquire negative wait": func() error { _, err := sem.TryAcquire(ctx, 1, -time.Second); return err },
		"Release 0":                func() error { return sem.Release(ctx, 0) },
		"TrySetPermits -1":         func() error { _, err := sem.TrySetPermits(ctx, -1); return err },
		"Acquire nil ctx":          func() error { return sem.Acquire(nilCtx, 1) },
		"AvailablePermits nil ctx": func() error { _, err := sem.AvailablePermits(nilCtx); return err },
		"AddPermits empty name":    func() error { return c.Semaphore("").AddPermits(ctx, 1) },
	}
	rdb := srv.Client(t)
	before := commandsProcessed(t, rdb)
	for name, call := range tests {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, lockactor.ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
		})
	}
	if after := commandsProcessed(t, rdb); after != before+1 {
		t.Fatalf("bad input sent %d commands to Redis", after-before-1)
	}
}
