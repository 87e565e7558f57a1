package lockactor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// TestRWWaitingWriterHoldsLaterReadersBack guards a past defect: within one
// Client, a reader that asked while a writer was queued was granted at once
// (the read lock was held, so Redis said yes), and a steady flow of readers
// could starve the writer. As in sync.RWMutex, a waiting writer now holds
// later readers of its Client back (its own owner's too: granted a read
// first, its queued write would be refused as an upgrade); an owner that
// already holds (reentrant read, write-then-read) never waits behind
// anyone, or it would wait for itself.
func TestRWWaitingWriterHoldsLaterReadersBack(t *testing.T) {
	for _, tt := range []struct {
		name string
		// first takes the hold the writer queues behind, on the owner
		// that will ask to read later when reentrant.
		writeFirst bool
		// reentrant: the late reader is the first holder's owner.
		reentrant bool
		// writers: the late reader is the queued writer's owner.
		writers bool
		// try: the late reader uses TryLock (one attempt), else Lock.
		try bool
		// wantAtOnce: the late reader is granted while the writer waits.
		wantAtOnce bool
	}{
		{name: "NewReaderWaits", wantAtOnce: false},
		{name: "NewReaderTryLockRefused", try: true, wantAtOnce: false},
		{name: "WritersOwnReaderWaits", writers: true, wantAtOnce: false},
		{name: "ReentrantReadGoesFirst", reentrant: true, wantAtOnce: true},
		{name: "ReentrantTryLockGoesFirst", reentrant: true, try: true, wantAtOnce: true},
		{name: "WriteThenReadGoesFirst", writeFirst: true, reentrant: true, wantAtOnce: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			c := newClient(t, srv.Client(t))
			ctx := ctxFor(t, 20*time.Second)
			name := "rw-writer-first-" + tt.name
			first := c.ReadWriteLock(name)
			held := first.ReadLock()
			if tt.writeFirst {
				held = first.WriteLock()
			}
			if err := held.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			// The first hold's own stay in the queue is counted until the
			// actor settles after granting it.
			within(t, 5*time.Second, "the first hold left the queue", func() bool { return lockactor.QueuedRW(c, name) == 0 })
			waiting := c.ReadWriteLock(name)
			writer := waiting.WriteLock()
			wrote := make(chan error, 1)
			go func() { wrote <- writer.Lock(ctx) }()
			within(t, 5*time.Second, "the writer queued", func() bool { return lockactor.QueuedRW(c, name) == 1 })

			late := c.ReadWriteLock(name).ReadLock()
			switch {
			case tt.reentrant:
				late = first.ReadLock()
			case tt.writers:
				late = waiting.ReadLock()
			}
			var got bool
			var err error
			if tt.try {
				got, err = late.TryLock(ctx)
			} else {
				lctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				err = late.Lock(lctx)
				cancel()
				got = err == nil
				if errors.Is(err, context.DeadlineExceeded) {
					err = nil // still waiting when its ctx ended
				}
			}
			if err != nil {
				t.Fatalf("late reader: %v", err)
			}
			if got != tt.wantAtOnce {
				t.Fatalf("late reader granted = %v while a writer waits, want %v", got, tt.wantAtOnce)
			}
			select {
			case err := <-wrote:
				t.Fatalf("the writer returned while the first hold stood: %v", err)
			default:
			}
			// No deadlock: once the first owner lets go of everything,
			// the writer gets the lock.
			if got {
				if err := late.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-wrote:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the writer was not granted after the readers left")
			}
			if err := writer.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

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
