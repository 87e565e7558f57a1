package lockactor_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// TestGroupErrorsMatchFromTheRootPackage: a member that fails inside a
// RedLock round reaches the caller as a *lockactor.MemberError inside an
// ErrNoQuorum error, and a member whose Client was closed matches
// lockactor.ErrClosed through it.
func TestGroupErrorsMatchFromTheRootPackage(t *testing.T) {
	_, clients := redlockNodes(t, 3)
	ctx := ctxFor(t, 20*time.Second)
	rl, _ := redLockOn(clients, "rl-errors")
	for _, c := range clients[1:] {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	ok, err := rl.TryLock(ctx)
	if ok || !errors.Is(err, lockactor.ErrNoQuorum) {
		t.Fatalf("TryLock with 2 of 3 Clients closed = %v, %v; want ErrNoQuorum", ok, err)
	}
	var me *lockactor.MemberError
	if !errors.As(err, &me) || me.Name != "rl-errors" {
		t.Fatalf("errors.As(%v, *MemberError) = %v, %+v", err, errors.As(err, &me), me)
	}
	if !errors.Is(err, lockactor.ErrClosed) {
		t.Fatalf("a closed member's error %v does not match ErrClosed", err)
	}
}

// TestFairQueueInspection: QueueLength counts the owners queued in Redis
// from every Client, QueuePosition is each one's place; other kinds report 0.
func TestFairQueueInspection(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxFor(t, 20*time.Second)
	holder := newClient(t, srv.Client(t)).FairLock("inspect")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	var waiters []*lockactor.Lock
	done := make(chan error, 2)
	for i := range 2 {
		w := newClient(t, srv.Client(t)).FairLock("inspect")
		waiters = append(waiters, w)
		go func() {
			if err := w.Lock(ctx); err != nil {
				done <- err
				return
			}
			done <- w.Unlock(ctx)
		}()
		within(t, 5*time.Second, "waiter queued", func() bool {
			p, err := w.QueuePosition(ctx)
			return err == nil && p == i+1
		})
	}
	if n, err := holder.QueueLength(ctx); n != 2 || err != nil {
		t.Fatalf("QueueLength = %d, %v; want 2", n, err)
	}
	if p, err := holder.QueuePosition(ctx); p != 0 || err != nil {
		t.Fatalf("the holder's QueuePosition = %d, %v; want 0", p, err)
	}
	plain := newClient(t, srv.Client(t)).Lock("inspect-plain")
	if n, err := plain.QueueLength(ctx); n != 0 || err != nil {
		t.Fatalf("a plain lock's QueueLength = %d, %v; want 0", n, err)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for range waiters {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n, err := holder.QueueLength(ctx); n != 0 || err != nil {
		t.Fatalf("QueueLength after everyone ran = %d, %v; want 0", n, err)
	}
}
