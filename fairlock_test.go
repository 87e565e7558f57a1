package lockactor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/redisio"
)

// queueLen is the length of a fair lock's Redis queue.
func queueLen(t *testing.T, srv *redistest.Server, name string) int64 {
	t.Helper()
	return srv.Client(t).LLen(context.Background(), "redisson_lock_queue:{"+name+"}").Val()
}

// fairQueue lists the owners queued in Redis for fair lock name.
func fairQueue(t *testing.T, rdb *redis.Client, name string) []string {
	t.Helper()
	q, err := rdb.LRange(context.Background(), redisio.FairQueue(name), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestFairLockGrantsInRequestOrder(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := ctxFor(t, 30*time.Second)
	holder := newClient(t, srv.Client(t)).FairLock("fair")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 8
	order := make(chan int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		l := newClient(t, srv.Client(t)).FairLock("fair")
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Lock(ctx); err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			order <- i
			time.Sleep(20 * time.Millisecond)
			if err := l.Unlock(ctx); err != nil {
				t.Errorf("waiter %d unlock: %v", i, err)
			}
		}()
		// Queue them one after another: each is in Redis before the next asks.
		within(t, 2*time.Second, fmt.Sprintf("waiter %d queued", i), func() bool {
			return queueLen(t, srv, "fair") == int64(i+1)
		})
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Fatalf("grant #%d went to waiter %d, want %d", want, got, want)
		}
		want++
	}
	if want != n {
		t.Fatalf("%d grants, want %d", want, n)
	}
}

func TestFairWaiterThatCancelsDoesNotStallQueue(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxFor(t, 20*time.Second)
	holder := newClient(t, srv.Client(t)).FairLock("fair-cancel")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	quitter := newClient(t, srv.Client(t)).FairLock("fair-cancel")
	quitCtx, quit := context.WithCancel(ctx)
	quitDone := make(chan error, 1)
	go func() { quitDone <- quitter.Lock(quitCtx) }()
	within(t, 2*time.Second, "quitter queued", func() bool { return queueLen(t, srv, "fair-cancel") == 1 })

	next := newClient(t, srv.Client(t)).FairLock("fair-cancel")
	got := make(chan time.Time, 1)
	go func() {
		if err := next.Lock(ctx); err != nil {
			t.Errorf("next: %v", err)
		}
		got <- time.Now()
	}()
	within(t, 2*time.Second, "next queued", func() bool { return queueLen(t, srv, "fair-cancel") == 2 })
	quit()
	if err := <-quitDone; err == nil {
		t.Fatal("cancelled fair waiter acquired")
	}
	within(t, 2*time.Second, "quitter left the queue", func() bool { return queueLen(t, srv, "fair-cancel") == 1 })
	released := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-got:
		if d := at.Sub(released); d > 300*time.Millisecond {
			t.Fatalf("next waiter got the lock %v after the release", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the queue stalled behind a cancelled waiter")
	}
}

func TestFairWaiterOfDeadProcessIsSkipped(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := ctxFor(t, 20*time.Second)
	// A queued waiter's deadline is the holder's TTL plus w (the protocol),
	// so a short watchdog on the holder keeps the test short.
	const w, wd = 700 * time.Millisecond, time.Second
	holder := newClient(t, srv.Client(t), lockactor.WithWatchdogTimeout(wd)).FairLock("fair-dead")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	dyingRDB := srv.Client(t)
	dying, err := lockactor.New(dyingRDB, lockactor.WithFairLockWaitTimeout(w))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = dying.FairLock("fair-dead").Lock(ctx) }()
	within(t, 2*time.Second, "doomed waiter queued", func() bool { return queueLen(t, srv, "fair-dead") == 1 })
	// The process dies in the queue: its connection goes first, so Close
	// cannot take the waiter out as it would on a clean exit.
	_ = dyingRDB.Close()
	_ = dying.Close()

	next := newClient(t, srv.Client(t)).FairLock("fair-dead")
	got := make(chan time.Time, 1)
	go func() {
		if err := next.Lock(ctx); err != nil {
			t.Errorf("next: %v", err)
		}
		got <- time.Now()
	}()
	within(t, 2*time.Second, "next queued", func() bool { return queueLen(t, srv, "fair-dead") == 2 })
	released := time.Now()
	if err := holder.Unlock(ctx); err != nil { // tells the dead head, which never answers
		t.Fatal(err)
	}
	select {
	case at := <-got:
		if d := at.Sub(released); d > wd+w+time.Second {
			t.Fatalf("the live waiter got the lock %v after the release, want by the dead one's deadline", d)
		} else {
			t.Logf("the live waiter got the lock %v after the release", d)
		}
	case <-time.After(wd + w + 5*time.Second):
		t.Fatal("the dead waiter was never skipped")
	}
}

func TestFairLockMutualExclusion(t *testing.T) {
	srv := redistest.Start(t)
	contend(t, srv, 3, 6, 5, func(c *lockactor.Client) lockactor.Locker { return c.FairLock("fair-mx") })
	if n := queueLen(t, srv, "fair-mx"); n != 0 {
		t.Fatalf("queue holds %d entries after everyone is done", n)
	}
}
