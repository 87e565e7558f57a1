package lockactor_test

// Regression tests for a review of the scripts and the group coordinator:
// a read unlock that shortened a write hold, fair-queue wake-ups that went to
// a dead head or failed on a tail without a deadline, a late RedLock grant
// that was kept, and Lock honouring WithWait.

import (
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// A read unlock must not shorten a write hold's TTL: once read_unlock
// recomputed the hash's TTL from the remaining read holds alone (the write
// hold has no rwlock_timeout key), so a short-lease read hold taken under a
// write hold let another writer in ~200 ms after a read unlock.
func TestReadUnlockKeepsWriteHoldTTL(t *testing.T) {
	tests := []struct {
		name  string
		write []lockactor.LockOption // how the write hold is taken
	}{
		{"watchdog", nil},
		{"long lease", []lockactor.LockOption{lockactor.WithLease(20 * time.Second)}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			ctx := ctxFor(t, 20*time.Second)
			name := "rw-short-read-" + string(rune('a'+i))
			rw := newClient(t, srv.Client(t)).ReadWriteLock(name)
			if err := rw.WriteLock().Lock(ctx, tt.write...); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := rw.ReadLock().Lock(ctx, lockactor.WithLease(200*time.Millisecond)); err != nil {
					t.Fatal(err)
				}
			}
			if err := rw.ReadLock().Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(400 * time.Millisecond)
			other := newClient(t, srv.Client(t)).ReadWriteLock(name).WriteLock()
			if ok, err := other.TryLock(ctx); ok || err != nil {
				t.Fatalf("another writer's TryLock during the first write hold = %v, %v (hash PTTL now %v)",
					ok, err, srv.Client(t).PTTL(ctx, name).Val())
			}
			select {
			case <-rw.WriteLock().Lost():
				t.Fatal("the write hold's Lost closed after a read unlock")
			default:
			}
			if err := rw.WriteLock().Unlock(ctx); err != nil {
				t.Fatalf("write Unlock: %v", err)
			}
		})
	}
}
