package lockactor_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockactor/lockactor/internal/redistest"
)

func TestSemaphoreNeverExceedsPermits(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	const permits = 3
	if ok, err := newClient(t, srv.Client(t)).Semaphore("sem").TrySetPermits(ctx, permits); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	var inside, peak atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		s := newClient(t, srv.Client(t)).Semaphore("sem")
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < 10; r++ {
					if err := s.Acquire(ctx, 1); err != nil {
						t.Errorf("Acquire: %v", err)
						return
					}
					n := inside.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					if err := s.Release(ctx, 1); err != nil {
						t.Errorf("Release: %v", err)
					}
				}
			}()
		}
	}
	wg.Wait()
	if p := peak.Load(); p > permits {
		t.Fatalf("%d permits in use at once, only %d exist", p, permits)
	}
	if n, _ := newClient(t, srv.Client(t)).Semaphore("sem").AvailablePermits(ctx); n != permits {
		t.Fatalf("AvailablePermits at the end = %d, want %d", n, permits)
	}
}

func TestSemaphoreWakesOnReleaseElsewhere(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := ctxFor(t, 20*time.Second)
	a := newClient(t, srv.Client(t)).Semaphore("sem-wake")
	b := newClient(t, srv.Client(t)).Semaphore("sem-wake")
	if ok, err := a.TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, _ := a.TrySetPermits(ctx, 5); ok {
		t.Fatal("TrySetPermits replaced an existing count")
	}
	if err := a.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.TryAcquire(ctx, 1, 0); ok || err != nil {
		t.Fatalf("TryAcquire with none left = %v, %v", ok, err)
	}
	d := wakeAfter(t, func() error { return b.Acquire(ctx, 1) }, func() error { return a.Release(ctx, 1) })
	if d > 300*time.Millisecond {
		t.Fatalf("blocked Acquire woke %v after the Release, want <= 300ms", d)
	}
	// Cancel mid-wait: no permit taken.
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := a.Acquire(cctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with none left and a 100ms ctx = %v", err)
	}
	if err := a.AddPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if n, _ := a.AvailablePermits(ctx); n != 2 {
		t.Fatalf("AvailablePermits = %d, want 2", n)
	}
}
