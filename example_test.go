package lockactor_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
)

// The examples run on an in-process miniredis so that they are
// self-contained; point redis.Options.Addr at a real server in production.
//
// docs/USAGE.md and docs/DEPLOYMENT.md show the body of most of them: each
// Go block there names its example on its first line, and shows the
// example's body from the line "// Shown from here." (or from the top when
// there is none) up to its "// Output:" comment. The lines above the marker
// only build what a real program already has (a Redis, a Client, a ctx).
// readme_test.go fails when the two differ.

// newExampleRedis starts an in-process Redis and returns its address.
func newExampleRedis() (addr string, stop func()) {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	return mr.Addr(), mr.Close
}

// newExampleClient starts an in-process Redis and a Client on it, made as
// Example shows.
func newExampleClient(opts ...lockactor.Option) (*lockactor.Client, func()) {
	addr, stopRedis := newExampleRedis()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	client, err := lockactor.New(rdb, opts...)
	if err != nil {
		log.Fatal(err)
	}
	return client, func() { client.Close(); rdb.Close(); stopRedis() }
}

// One Client per process over a go-redis client, and one Lock handle per
// owner.
func Example() {
	addr, stop := newExampleRedis()
	defer stop()
	// Shown from here.
	rdb := redis.NewClient(&redis.Options{Addr: addr}) // your Redis, e.g. "localhost:6379"
	defer rdb.Close()
	client, err := lockactor.New(rdb) // one per process; it shares rdb and never closes it
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx := context.Background()
	lock := client.Lock("invoice:42")      // a handle is one owner: one per goroutine
	if err := lock.Lock(ctx); err != nil { // waits until acquired or ctx ends
		log.Fatal(err)
	}
	defer lock.Unlock(ctx)
	fmt.Println("invoice 42 is ours; the watchdog renews the lease until Unlock")
	// Output: invoice 42 is ours; the watchdog renews the lease until Unlock
}

func ExampleLock_TryLock() {
	client, stop := newExampleClient()
	defer stop()
	ctx := context.Background()
	// Shown from here.
	first, second := client.Lock("report"), client.Lock("report")
	ok, _ := first.TryLock(ctx, lockactor.WithLease(10*time.Second)) // one attempt; a fixed lease, no watchdog
	fmt.Println("first:", ok)
	ok, _ = second.TryLock(ctx, lockactor.WithWait(50*time.Millisecond)) // waits up to 50ms
	fmt.Println("second:", ok)
	_ = first.Unlock(ctx)
	ok, _ = second.TryLock(ctx)
	fmt.Println("second, after first's Unlock:", ok)
	_ = second.Unlock(ctx)
	// Output:
	// first: true
	// second: false
	// second, after first's Unlock: true
}

// Extend gives a hold taken WithLease more time, from now, before its lease
// runs out. A watchdog-renewed hold needs no Extend, and refuses one.
func ExampleLock_Extend() {
	client, stop := newExampleClient()
	defer stop()
	ctx := context.Background()
	// Shown from here.
	lock := client.Lock("import:7")
	if err := lock.Lock(ctx, lockactor.WithLease(time.Minute)); err != nil {
		log.Fatal(err)
	}
	// The import takes longer than planned: ten more minutes from now.
	if err := lock.Extend(ctx, 10*time.Minute); err != nil {
		log.Fatal(err) // ErrNotHeld: the lease ran out first
	}
	left, _ := lock.RemainingLease(ctx)
	fmt.Println("more than a minute left:", left > time.Minute)
	_ = lock.Unlock(ctx)
	fmt.Println("after Unlock:", errors.Is(lock.Extend(ctx, time.Minute), lockactor.ErrNotHeld))

	watched := client.Lock("import:8")
	_ = watched.Lock(ctx) // no WithLease: the watchdog renews it
	fmt.Println("watchdog hold:", errors.Is(watched.Extend(ctx, time.Minute), lockactor.ErrInvalidArgument))
	_ = watched.Unlock(ctx)
	// Output:
	// more than a minute left: true
	// after Unlock: true
	// watchdog hold: true
}

// Every error names its lock and matches a sentinel error (or the context's
// error) with errors.Is.
func ExampleLock_Unlock_notHeld() {
	client, stop := newExampleClient()
	defer stop()
	ctx := context.Background()
	// Shown from here.
	mine, theirs := client.Lock("invoice:42"), client.Lock("invoice:42")
	_ = theirs.Lock(ctx)
	if err := mine.Unlock(ctx); errors.Is(err, lockactor.ErrNotHeld) { // mine never held it
		fmt.Println(err)
	}
	_ = theirs.Unlock(ctx)
	// Output: lock "invoice:42": lockactor: lock not held
}

// A holder watches Lost to stop work that relied on a lock found gone. The
// watchdog notices at its next renewal: every third of the watchdog timeout,
// here 300ms so that the example is quick (the default is 30s).
func ExampleLock_Lost() {
	client, stop := newExampleClient(lockactor.WithWatchdogTimeout(300 * time.Millisecond))
	defer stop()
	ctx := context.Background()
	// Shown from here.
	lock := client.Lock("nightly-report")
	if err := lock.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	// The lock disappears while held: here a ForceUnlock by someone else; in
	// production a failover that lost it, or a holder paused past its lease.
	_, _ = client.Lock("nightly-report").ForceUnlock(ctx)

	select {
	case <-lock.Lost(): // the next renewal found the hold gone
		fmt.Println("lock lost: abandon the report")
	case <-time.After(time.Minute): // the report's work
		fmt.Println("report written")
	}
	err := lock.Unlock(ctx)
	fmt.Println("unlock:", errors.Is(err, lockactor.ErrNotHeld))
	// Output:
	// lock lost: abandon the report
	// unlock: true
}

// A storage service that remembers the highest token it has seen rejects a
// write from a holder whose lease ran out while it was paused.
func ExampleClient_FencedLock() {
	client, stop := newExampleClient()
	defer stop()
	ctx := context.Background()
	// Shown from here.
	highest := uint64(0) // kept by the storage service
	write := func(token uint64) error {
		if token < highest {
			return errors.New("stale token: rejected")
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
	// a writes: stale token: rejected
}

func ExampleClient_SpinLock() {
	addr, stop := newExampleRedis()
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	// Shown from here.
	// On a Redis service that restricts pub/sub: waiters retry from 1ms,
	// doubling up to 50ms (default 128ms), with jitter.
	client, err := lockactor.New(rdb, lockactor.WithSpinBackoff(time.Millisecond, 50*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	other, _ := lockactor.New(rdb) // another process, holding with a plain Lock
	defer other.Close()

	holder := other.Lock("nightly-report")
	_ = holder.Lock(ctx)
	spin := client.SpinLock("nightly-report") // the same hash: they exclude each other
	ok, _ := spin.TryLock(ctx, lockactor.WithWait(100*time.Millisecond))
	fmt.Println("while the Lock holds:", ok)
	time.AfterFunc(50*time.Millisecond, func() { _ = holder.Unlock(ctx) })
	if err := spin.Lock(ctx); err != nil { // retries until the Unlock; never subscribes
		log.Fatal(err)
	}
	fmt.Println("after its Unlock: held")
	_ = spin.Unlock(ctx)
	// Output:
	// while the Lock holds: false
	// after its Unlock: held
}

func ExampleClient_ReadWriteLock() {
	client, stop := newExampleClient()
	defer stop()
	ctx := context.Background()
	// Shown from here.
	r1, r2 := client.ReadWriteLock("catalog"), client.ReadWriteLock("catalog") // one per owner
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
	client, stop := newExampleClient()
	defer stop()
	ctx := context.Background()
	// Shown from here.
	pool := client.Semaphore("db-connections")
	_, _ = pool.TrySetPermits(ctx, 2) // only the first client to ask sets it
	_ = pool.Acquire(ctx, 2)
	ok, _ := pool.TryAcquire(ctx, 1, 10*time.Millisecond)
	fmt.Println("third connection:", ok)
	_ = pool.Release(ctx, 2) // permits are not owned: any handle may release them
	n, _ := pool.AvailablePermits(ctx)
	fmt.Println("available:", n)
	// Output:
	// third connection: false
	// available: 2
}

// Workers count a latch down; a waiter on any client goes on once all have.
func ExampleClient_CountDownLatch() {
	client, stop := newExampleClient()
	defer stop()
	ctx := context.Background()
	// Shown from here.
	ready := client.CountDownLatch("workers-ready")
	_, _ = ready.TrySetCount(ctx, 3) // only when no count is set
	for range 3 {
		go func() {
			_ = client.CountDownLatch("workers-ready").CountDown(ctx)
		}()
	}
	if err := ready.Await(ctx); err != nil { // until the count reaches 0
		log.Fatal(err)
	}
	n, _ := ready.Count(ctx)
	fmt.Println("all workers ready; count:", n)
	// Output: all workers ready; count: 0
}

func ExampleClient_FairLock() {
	client, stop := newExampleClient()
	defer stop()
	ctx := context.Background()
	// Shown from here.
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

// A MultiLock holds all of its locks or none.
func ExampleNewMultiLock() {
	client, stop := newExampleClient()
	defer stop()
	ctx := context.Background()
	// Shown from here.
	transfer := lockactor.NewMultiLock(client.Lock("account:1"), client.Lock("account:2"))
	if err := transfer.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	other := lockactor.NewMultiLock(client.Lock("account:2"), client.Lock("account:3"))
	ok, _ := other.TryLock(ctx) // account:2 is taken, so it takes neither
	fmt.Println("second transfer while the first holds:", ok)
	_ = transfer.Unlock(ctx)
	ok, _ = other.TryLock(ctx)
	fmt.Println("second transfer after Unlock:", ok)
	_ = other.Unlock(ctx)
	// Output:
	// second transfer while the first holds: false
	// second transfer after Unlock: true
}

// A RedLock holds a majority of independent masters: one Client per master.
func ExampleNewRedLock() {
	c1, stop1 := newExampleClient() // three independent Redis servers
	defer stop1()
	c2, stop2 := newExampleClient()
	defer stop2()
	c3, stop3 := newExampleClient()
	defer stop3()
	ctx := context.Background()
	// Shown from here.
	job := lockactor.NewRedLock(c1.Lock("job"), c2.Lock("job"), c3.Lock("job"))
	if err := job.Lock(ctx); err != nil { // ErrNoQuorum without a majority
		log.Fatal(err)
	}
	fmt.Println("held, with time left:", job.Validity() > 0) // lease minus acquisition time and drift
	_ = job.Unlock(ctx)
	// Output: held, with time left: true
}

// On Sentinel, pass go-redis's FailoverClient: holds and waiters follow the
// master. New sends nothing to Redis, so this example runs without servers.
func ExampleNew_sentinel() {
	// Shown from here.
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    "locks",
		SentinelAddrs: []string{"sentinel-1:26379", "sentinel-2:26379", "sentinel-3:26379"},
	})
	defer rdb.Close()
	client, err := lockactor.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	fmt.Println("nothing sent yet: the first lock call asks the sentinels for the master")
	// Output: nothing sent yet: the first lock call asks the sentinels for the master
}

// On a Redis Cluster, pass a ClusterClient. Here one in-process server plays
// a Cluster that owns every slot.
func ExampleNew_cluster() {
	addr, stop := newExampleRedis()
	defer stop()
	seeds := []string{addr}
	ctx := context.Background()
	// Shown from here.
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds})
	defer rdb.Close()
	client, err := lockactor.New(rdb) // releases go out on SPUBLISH when every master has it
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	lock := client.Lock("{tenant:7}:orders") // every key it derives stays in {tenant:7}'s slot
	if err := lock.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("locked on the slot's master")
	_ = lock.Unlock(ctx)
	// Output: locked on the slot's master
}
