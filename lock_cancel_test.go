package lockactor_test

// Lock's cancellation: a ctx that ends mid-wait, or races the grant.

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

func TestCancelMidWait(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 10*time.Second)
	holder := c.Lock("cancel")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	waiter := c.Lock("cancel")
	go func() { done <- waiter.Lock(waitCtx) }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	cancelled := time.Now()
	err := <-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock after cancel = %v, want context.Canceled", err)
	}
	if d := time.Since(cancelled); d > 250*time.Millisecond {
		t.Fatalf("Lock returned %v after cancel", d)
	}
	// A later waiter is not stuck behind the one that left.
	next := c.Lock("cancel")
	got := make(chan error, 1)
	go func() { got <- next.Lock(ctx) }()
	time.Sleep(50 * time.Millisecond)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the waiter behind a cancelled one was not woken")
	}
	if n, _ := waiter.HoldCount(ctx); n != 0 {
		t.Fatal("the cancelled waiter holds the lock")
	}
}

// TestCancelRacingGrant cancels waits at the moment the lock is released, many
// times: whichever side wins, a cancelled call must hold nothing.
func TestCancelRacingGrant(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 60*time.Second)
	holder, waiter := c.Lock("race"), c.Lock("race")
	cancelledHolds, grants := 0, 0
	for i := 0; i < 100; i++ {
		if err := holder.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		waitCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- waiter.Lock(waitCtx) }()
		time.Sleep(time.Duration(i%5) * time.Millisecond)
		go func() { _ = holder.Unlock(ctx) }()
		time.Sleep(time.Duration(i%10) * 300 * time.Microsecond)
		cancel()
		err := <-done
		if err == nil {
			grants++
			if err := waiter.Unlock(ctx); err != nil {
				t.Fatalf("round %d: Unlock after a grant: %v", i, err)
			}
			continue
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: %v", i, err)
		}
		cancelledHolds++
		// The give-back is asynchronous but ordered before any later call.
		within(t, 2*time.Second, "cancelled waiter's hold given back", func() bool {
			n, _ := waiter.HoldCount(ctx)
			return n == 0
		})
		within(t, 2*time.Second, "lock free again", func() bool {
			locked, _ := holder.IsLocked(ctx)
			return !locked
		})
	}
	t.Logf("%d grants, %d cancellations", grants, cancelledHolds)
}

// commandsProcessed reads the server's total_commands_processed.
func commandsProcessed(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	return infoField(info, "total_commands_processed")
}

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Callers that give up free their queue entry at once, wherever they stand.
func TestWithdrawnWaitersAreFreed(t *testing.T) {
	// Not parallel: it measures the whole process's heap.
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	ctx := ctxFor(t, 60*time.Second)
	if err := c.Lock("withdrawn").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	long := lockAsync(ctx, c.Lock("withdrawn")) // stays at the head
	time.Sleep(100 * time.Millisecond)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// A wait long enough that the actor queues each call before it gives up.
	const calls, callers = 40000, 40
	before := heap()
	var wg sync.WaitGroup
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := c.Lock("withdrawn")
			for i := 0; i < calls/callers; i++ {
				if ok, err := l.TryLock(ctx, lockactor.WithWait(time.Millisecond)); ok || err != nil {
					t.Errorf("TryLock = %v, %v", ok, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	time.Sleep(200 * time.Millisecond) // the last Abandon messages
	grown := int64(heap()) - int64(before)
	t.Logf("heap grew %d B over %d withdrawn calls (%.0f B each)", grown, calls, float64(grown)/calls)
	if grown > calls*50 {
		t.Fatalf("heap grew %d B (%d B per withdrawn call): withdrawn waiters are kept", grown, grown/calls)
	}
	select {
	case err := <-long:
		t.Fatalf("the long waiter returned: %v", err)
	default:
	}
}
