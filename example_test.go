package lockactor_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
)

// The examples run on an in-process miniredis so that they are
// self-contained; point redis.Options.Addr at a real server in production.
func Example() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	client, err := lockactor.New(rdb)
	if err != nil {
		panic(err)
	}
	defer client.Close()

	ctx := context.Background()
	lock := client.Lock("invoice:42") // one handle per goroutine
	if err := lock.Lock(ctx); err != nil {
		panic(err)
	}
	fmt.Println("locked; the watchdog renews it until Unlock")
	if err := lock.Unlock(ctx); err != nil {
		panic(err)
	}
	// Output: locked; the watchdog renews it until Unlock
}

func ExampleLock_TryLock() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	client, _ := lockactor.New(rdb)
	defer client.Close()
	ctx := context.Background()

	first, second := client.Lock("report"), client.Lock("report")
	ok, _ := first.TryLock(ctx)
	fmt.Println("first:", ok)
	ok, _ = second.TryLock(ctx) // one attempt; add lockactor.WithWait(d) to wait up to d
	fmt.Println("second:", ok)
	_ = first.Unlock(ctx)
	// Output:
	// first: true
	// second: false
}

// newExampleClient starts an in-process Redis and a Client on it.
func newExampleClient() (*lockactor.Client, func()) {
	mr, _ := miniredis.Run()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	client, _ := lockactor.New(rdb)
	return client, func() { client.Close(); rdb.Close(); mr.Close() }
}

// A storage service that remembers the highest token it has seen rejects a
// write from a holder whose lease ran out while it was paused.
func ExampleClient_FencedLock() {
	client, done := newExampleClient()
	defer done()
	ctx := context.Background()

	highest := uint64(0)
	write := func(token uint64) error {
		if token < highest {
			return fmt.Errorf("stale token %d < %d", token, highest)
		}
		highest = token
		return nil
	}

	a, b := client.FencedLock("ledger"), client.FencedLock("ledger")
	_ = a.Lock(ctx)
	staleToken := a.Token() // a pauses here; suppose its lease runs out...
	_ = a.Unlock(ctx)       // (simulated: the lock passes to b)
	_ = b.Lock(ctx)
	fmt.Println("b writes:", write(b.Token()))
	fmt.Println("a writes:", write(staleToken))
	_ = b.Unlock(ctx)
	// Output:
	// b writes: <nil>
	// a writes: stale token 1 < 2
}

func ExampleClient_ReadWriteLock() {
	client, done := newExampleClient()
	defer done()
	ctx := context.Background()

	r1, r2 := client.ReadWriteLock("catalog"), client.ReadWriteLock("catalog")
	w := client.ReadWriteLock("catalog")
	_ = r1.ReadLock().Lock(ctx)
	_ = r2.ReadLock().Lock(ctx) // readers share
	ok, _ := w.WriteLock().TryLock(ctx)
	fmt.Println("writer while reading:", ok)
	_ = r1.ReadLock().Unlock(ctx)
	_ = r2.ReadLock().Unlock(ctx)
	ok, _ = w.WriteLock().TryLock(ctx)
	fmt.Println("writer alone:", ok)
	_ = w.WriteLock().Unlock(ctx)
	// Output:
	// writer while reading: false
	// writer alone: true
}

func ExampleClient_Semaphore() {
	client, done := newExampleClient()
	defer done()
	ctx := context.Background()

	pool := client.Semaphore("db-connections")
	_, _ = pool.TrySetPermits(ctx, 2) // only the first client to ask sets it
	_ = pool.Acquire(ctx, 2)
	ok, _ := pool.TryAcquire(ctx, 1, 10*time.Millisecond)
	fmt.Println("third connection:", ok)
	_ = pool.Release(ctx, 2)
	n, _ := pool.AvailablePermits(ctx)
	fmt.Println("available:", n)
	// Output:
	// third connection: false
	// available: 2
}

func ExampleClient_FairLock() {
	client, done := newExampleClient()
	defer done()
	ctx := context.Background()

	holder := client.FairLock("printer")
	_ = holder.Lock(ctx)
	order := make(chan string, 2)
	for _, name := range []string{"first", "second"} {
		l := client.FairLock("printer")
		go func() {
			_ = l.Lock(ctx) // queued in Redis in arrival order, across all clients
			order <- name
			_ = l.Unlock(ctx)
		}()
		time.Sleep(50 * time.Millisecond) // let it join the queue before the next
	}
	_ = holder.Unlock(ctx)
	fmt.Println(<-order, <-order)
	// Output: first second
}
