package lockactor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// extendKinds are the kinds a *Lock can be: each with the handle that
// extends (holder) and the one another Client uses to contend (rival: the
// write view against a reader, who would share the lock with other readers).
var extendKinds = []struct {
	name          string
	holder, rival func(c *lockactor.Client, name string) *lockactor.Lock
}{
	{"Lock", (*lockactor.Client).Lock, (*lockactor.Client).Lock},
	{"FairLock", (*lockactor.Client).FairLock, (*lockactor.Client).FairLock},
	{"FencedLock", (*lockactor.Client).FencedLock, (*lockactor.Client).FencedLock},
	{"ReadLock", readView, writeView},
	{"WriteLock", writeView, writeView},
}

func readView(c *lockactor.Client, name string) *lockactor.Lock {
	return c.ReadWriteLock(name).ReadLock()
}

func writeView(c *lockactor.Client, name string) *lockactor.Lock {
	return c.ReadWriteLock(name).WriteLock()
}

// TestLockExtendKeepsTheHold: a WithLease hold extended before its lease
// runs out is still held, exclusively, well after the first lease would have
// ended: another Client's TryLock fails, Lost stays open, the key's TTL is
// the new lease, a fenced token stays the same, and Unlock finds the hold.
func TestLockExtendKeepsTheHold(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := ctxFor(t, 30*time.Second)
	a, b := newClient(t, srv.Client(t)), newClient(t, srv.Client(t))
	const first, extended = 400 * time.Millisecond, 5 * time.Second
	for _, k := range extendKinds {
		t.Run(k.name, func(t *testing.T) {
			name := "extend-keeps-" + k.name
			l := k.holder(a, name)
			granted := time.Now()
			if ok, err := l.TryLock(ctx, lockactor.WithLease(first)); !ok || err != nil {
				t.Fatalf("TryLock = %v, %v", ok, err)
			}
			token := l.Token()
			time.Sleep(first / 4)
			if err := l.Extend(ctx, extended); err != nil {
				t.Fatalf("Extend: %v", err)
			}
			if ttl, err := l.RemainingLease(ctx); err != nil || ttl <= first || ttl > extended {
				t.Fatalf("RemainingLease after Extend = %v, %v; want in (%v, %v]", ttl, err, first, extended)
			}
			time.Sleep(time.Until(granted.Add(first + 300*time.Millisecond)))
			if ok, err := k.rival(b, name).TryLock(ctx); ok || err != nil {
				t.Fatalf("another Client's TryLock after the first lease = %v, %v; want false", ok, err)
			}
			select {
			case <-l.Lost():
				t.Fatal("Lost closed on an extended hold")
			default:
			}
			if got := l.Token(); got != token {
				t.Fatalf("Token after Extend = %d, want %d", got, token)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock of the extended hold: %v", err)
			}
		})
	}
}

// TestLockExtendErrors: Extend refuses what it must not extend, with the
// sentinel the contract names, and leaves holds it refused as they were.
func TestLockExtendErrors(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxFor(t, 30*time.Second)
	c := newClient(t, srv.Client(t))
	var nilCtx context.Context
	tests := []struct {
		name string
		// setup brings l (named name on c) into the case's state; it
		// returns the ctx Extend gets.
		setup func(t *testing.T, l *lockactor.Lock, name string) context.Context
		lease time.Duration
		want  error
	}{
		{"never held", func(*testing.T, *lockactor.Lock, string) context.Context { return ctx }, time.Second, lockactor.ErrNotHeld},
		{"held by another handle", func(t *testing.T, _ *lockactor.Lock, name string) context.Context {
			lockWith(t, ctx, c.Lock(name), lockactor.WithLease(10*time.Second))
			return ctx
		}, time.Second, lockactor.ErrNotHeld},
		{"lease expired", func(t *testing.T, l *lockactor.Lock, _ string) context.Context {
			// A grant whose reply comes back after its short lease is given
			// back (TryLock false): under a loaded suite, try again.
			const lease = 100 * time.Millisecond
			for try := 1; ; try++ {
				ok, err := l.TryLock(ctx, lockactor.WithLease(lease))
				if err != nil || (!ok && try == 10) {
					t.Fatalf("TryLock with a %v lease, try %d = %v, %v", lease, try, ok, err)
				}
				if ok {
					break
				}
			}
			time.Sleep(3 * lease)
			return ctx
		}, time.Second, lockactor.ErrNotHeld},
		{"released", func(t *testing.T, l *lockactor.Lock, _ string) context.Context {
			lockWith(t, ctx, l, lockactor.WithLease(10*time.Second))
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			return ctx
		}, time.Second, lockactor.ErrNotHeld},
		{"zero lease", holdFor10s(ctx), 0, lockactor.ErrInvalidArgument},
		{"negative lease", holdFor10s(ctx), -time.Second, lockactor.ErrInvalidArgument},
		{"watchdog hold", func(t *testing.T, l *lockactor.Lock, _ string) context.Context {
			lockWith(t, ctx, l)
			return ctx
		}, time.Second, lockactor.ErrInvalidArgument},
		{"nil ctx", func(*testing.T, *lockactor.Lock, string) context.Context { return nilCtx }, time.Second, lockactor.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "extend-err-" + tt.name
			l := c.Lock(name)
			extendCtx := tt.setup(t, l, name)
			before, err := l.RemainingLease(ctx)
			if err != nil {
				t.Fatal(err)
			}
			err = l.Extend(extendCtx, tt.lease)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Extend = %v, want %v", err, tt.want)
			}
			if want := `lock "` + name + `": `; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
				t.Fatalf("Extend's error %q does not name the lock", err)
			}
			// A refused Extend leaves the key's TTL alone: it neither grows
			// nor shrinks to the requested lease.
			after, err := l.RemainingLease(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if after > before || before-after > 500*time.Millisecond {
				t.Fatalf("RemainingLease went from %v to %v on a refused Extend", before, after)
			}
		})
	}
}

// lockWith takes l with opts or fails the test; the hold is released when
// the test ends (an error then, for a hold already gone, is expected).
func lockWith(t *testing.T, ctx context.Context, l *lockactor.Lock, opts ...lockactor.LockOption) {
	t.Helper()
	if ok, err := l.TryLock(ctx, opts...); !ok || err != nil {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	t.Cleanup(func() { _ = l.Unlock(context.Background()) })
}

// holdFor10s is a setup that takes l with a 10 s lease.
func holdFor10s(ctx context.Context) func(*testing.T, *lockactor.Lock, string) context.Context {
	return func(t *testing.T, l *lockactor.Lock, _ string) context.Context {
		lockWith(t, ctx, l, lockactor.WithLease(10*time.Second))
		return ctx
	}
}

// TestLockExtendAfterClose: Extend on a closed Client returns ErrClosed
// naming the lock, and so does one waiting on a hung Redis when Close
// begins; one whose ctx ends first returns the ctx's error. None hangs.
func TestLockExtendAfterClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := ctxFor(t, 30*time.Second)
	tests := []struct {
		name string
		// run makes the Extend of a 10 s hold of l on c (whose server is srv).
		run  func(t *testing.T, srv *redistest.Server, c *lockactor.Client, l *lockactor.Lock) error
		want error
	}{
		{"closed before", func(t *testing.T, _ *redistest.Server, c *lockactor.Client, l *lockactor.Lock) error {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			return l.Extend(ctx, time.Second)
		}, lockactor.ErrClosed},
		{"closed while Redis hangs", func(t *testing.T, srv *redistest.Server, c *lockactor.Client, l *lockactor.Lock) error {
			srv.Pause(t)
			defer srv.Resume(t)
			done := make(chan error, 1)
			go func() { done <- l.Extend(context.Background(), time.Second) }()
			time.Sleep(100 * time.Millisecond)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			return waitErr(t, done, 5*time.Second, "Extend after Close")
		}, lockactor.ErrClosed},
		{"ctx ends while Redis hangs", func(t *testing.T, srv *redistest.Server, _ *lockactor.Client, l *lockactor.Lock) error {
			srv.Pause(t)
			defer srv.Resume(t)
			short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			return l.Extend(short, time.Second)
		}, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, srv.Client(t))
			l := c.Lock("extend-close-" + tt.name)
			if ok, err := l.TryLock(ctx, lockactor.WithLease(10*time.Second)); !ok || err != nil {
				t.Fatalf("TryLock = %v, %v", ok, err)
			}
			err := tt.run(t, srv, c, l)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Extend = %v, want %v", err, tt.want)
			}
			if want := `lock "` + l.Name() + `": `; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
				t.Fatalf("Extend's error %q does not name the lock", err)
			}
		})
	}
}
