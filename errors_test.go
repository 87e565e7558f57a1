package lockactor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// Every error names the kind it concerns and the name, and still matches its
// sentinel: before, a permit's "not held", a semaphore's and a latch's Redis
// errors all read `lock "name": ...`.
func TestErrorsNameTheirKind(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := newClient(t, rdb)
	ctx := ctxFor(t, 10*time.Second)
	if err := rdb.HSet(ctx, "a-hash", "someone", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.PermitSemaphore("pp").TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	nobody := "00112233445566778899aabbccddeeff"
	tests := []struct {
		name   string
		call   func() error
		prefix string
		is     error  // nil: any Redis error
		says   string // the Redis error's text holds this (its wording differs on the fallback)
	}{
		{"Lock", func() error { return c.Lock("l").Lock(ctx, lockactor.WithLease(-1)) }, `lock "l": `, lockactor.ErrInvalidArgument, ""},
		{"FairLock", func() error { return c.FairLock("f").Unlock(ctx) }, `fair lock "f": `, lockactor.ErrNotHeld, ""},
		{"FencedLock", func() error { return c.FencedLock("x").Unlock(ctx) }, `fenced lock "x": `, lockactor.ErrNotHeld, ""},
		{"SpinLock", func() error { return c.SpinLock("s").Extend(ctx, 0) }, `spin lock "s": `, lockactor.ErrInvalidArgument, ""},
		{"read view", func() error { return c.ReadWriteLock("rw").ReadLock().Unlock(ctx) }, `read lock "rw": `, lockactor.ErrNotHeld, ""},
		{"write view", func() error { return c.ReadWriteLock("rw").WriteLock().Unlock(ctx) }, `write lock "rw": `, lockactor.ErrNotHeld, ""},
		{"Semaphore on a lock's hash", func() error { return c.Semaphore("a-hash").Release(ctx, 1) }, `semaphore "a-hash": `, nil, "WRONGTYPE"},
		{"PermitSemaphore not held", func() error { return c.PermitSemaphore("pp").Release(ctx, nobody) },
			`permit semaphore "pp": lockactor: permit ` + nobody + ` not held`, lockactor.ErrNotHeld, ""},
		{"CountDownLatch on a lock's hash", func() error { return c.CountDownLatch("a-hash").CountDown(ctx) }, `count-down latch "a-hash": `, nil, "WRONGTYPE"},
		{"MultiLock", func() error { return lockactor.NewMultiLock(c.Lock("m1"), c.Lock("m2")).Unlock(ctx) }, `multilock "m1,m2": `, lockactor.ErrNotHeld, ""},
		{"RedLock", func() error { _, err := lockactor.NewRedLock(c.Lock("r1"), nil).TryLock(ctx); return err }, `redlock "r1,<nil>": `, lockactor.ErrInvalidArgument, ""},
		{"ctx ended", func() error {
			done, cancel := context.WithCancel(ctx)
			cancel()
			return c.Semaphore("sem").Acquire(done, 1)
		}, `semaphore "sem": `, context.Canceled, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			switch {
			case err == nil:
				t.Fatal("no error")
			case !strings.HasPrefix(err.Error(), tc.prefix):
				t.Fatalf("error %q, want it to start with %q", err, tc.prefix)
			case tc.is != nil && !errors.Is(err, tc.is):
				t.Fatalf("error %q does not match %v", err, tc.is)
			case !strings.Contains(err.Error(), tc.says):
				t.Fatalf("error %q does not say %q", err, tc.says)
			}
		})
	}
}
