package lockactor_test

// MultiLock's contract: all members or none, and input checks shared with
// RedLock.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

func TestMultiLockAllOrNothing(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxFor(t, 20*time.Second)
	a, b := newClient(t, srv.Client(t)), newClient(t, srv.Client(t))
	ml := lockactor.NewMultiLock(a.Lock("m1"), b.Lock("m2"), a.Lock("m3"))
	other := b.Lock("m2")
	if err := other.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := ml.TryLock(ctx); ok || err != nil {
		t.Fatalf("MultiLock with a member taken = %v, %v", ok, err)
	}
	for _, name := range []string{"m1", "m3"} {
		within(t, time.Second, name+" released after the failed round", func() bool {
			locked, _ := a.Lock(name).IsLocked(ctx)
			return !locked
		})
	}
	done := make(chan error, 1)
	go func() { done <- ml.Lock(ctx) }()
	time.Sleep(100 * time.Millisecond)
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("MultiLock after the member was freed: %v", err)
	}
	for _, name := range []string{"m1", "m2", "m3"} {
		if locked, _ := a.Lock(name).IsLocked(ctx); !locked {
			t.Fatalf("%s not held by the MultiLock", name)
		}
	}
	// A member deleted behind our back: Unlock still releases the rest and
	// reports the one that failed.
	srv.Client(t).Del(ctx, "m2")
	err := ml.Unlock(ctx)
	if err == nil {
		t.Fatal("Unlock with a member gone reported nothing")
	}
	for _, name := range []string{"m1", "m3"} {
		if locked, _ := a.Lock(name).IsLocked(ctx); locked {
			t.Fatalf("%s still held after Unlock: %v", name, err)
		}
	}
}

func TestGroupBadInput(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := context.Background()
	var nilCtx context.Context
	tests := map[string]func() error{
		"MultiLock no locks":   func() error { return lockactor.NewMultiLock().Lock(ctx) },
		"RedLock no locks":     func() error { _, err := lockactor.NewRedLock().TryLock(ctx); return err },
		"MultiLock nil member": func() error { return lockactor.NewMultiLock(c.Lock("a"), nil).Lock(ctx) },
		"RedLock nil member":   func() error { return lockactor.NewRedLock(nil).Unlock(ctx) },
		"RedLock empty name":   func() error { return lockactor.NewRedLock(c.Lock("")).Lock(ctx) },
		"MultiLock nil ctx":    func() error { return lockactor.NewMultiLock(c.Lock("a")).Lock(nilCtx) },
		"RedLock negative lease": func() error {
			return lockactor.NewRedLock(c.Lock("a")).Lock(ctx, lockactor.WithLease(-1))
		},
	}
	for name, call := range tests {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, lockactor.ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
		})
	}
	if v := lockactor.NewRedLock().Validity(); v != 0 {
		t.Fatal("Validity of an invalid RedLock")
	}
}
