package lockactor_test

// How the LockOptions apply to each kind of lock.

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// An option Lock cannot use is refused, naming it, for every kind: before,
// Lock(ctx, WithWait(100ms)) on a held lock waited its whole ctx without a
// word (and, earlier still, a MultiLock gave up after the wait and a
// FairLock queued in Redis with it as its queue timeout). TryLock takes it.
func TestWithWaitOnLockIsRefused(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	_, nodes := redlockNodes(t, 3)
	ctx := ctxFor(t, 10*time.Second)
	wait := lockactor.WithWait(100 * time.Millisecond)
	red, _ := redLockOn(nodes, "opt-red")
	tests := []struct {
		name string
		l    lockactor.Locker
	}{
		{"Lock", c.Lock("opt")},
		{"FencedLock", c.FencedLock("opt-fenced")},
		{"FairLock", c.FairLock("opt-fair")},
		{"WriteLock", c.ReadWriteLock("opt-rw").WriteLock()},
		{"ReadLock", c.ReadWriteLock("opt-rw").ReadLock()},
		{"SpinLock", c.SpinLock("opt-spin")},
		{"Mutex", c.Mutex("opt-mutex")},
		{"MultiLock", lockactor.NewMultiLock(c.Lock("opt-a"), c.Lock("opt-b"))},
		{"RedLock", red},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.l.Lock(ctx, wait)
			if !errors.Is(err, lockactor.ErrInvalidArgument) || !strings.Contains(err.Error(), "WithWait") {
				t.Fatalf("Lock with WithWait = %v, want ErrInvalidArgument naming WithWait", err)
			}
			if ok, err := tc.l.TryLock(ctx, wait); !ok || err != nil {
				t.Fatalf("TryLock with WithWait = %v, %v", ok, err)
			}
			if err := tc.l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
