package lockactor_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/lockactor/lockactor"
)

// The short examples below are README.md's Usage: one per kind of lock,
// each taking it and giving it back. example_test.go has longer ones that
// show what each kind promises (docs/USAGE.md shows those).

// A Mutex is shared by goroutines the way a sync.Mutex is: one of them
// holds it at a time, in every process, and any may unlock it.
func Example_mutex() {
	client, stop := newExampleClient()
	defer stop()
	ctx := context.Background()
	// Shown from here.
	mu := client.Mutex("invoices") // one for every goroutine, like a sync.Mutex field
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := mu.Lock(ctx); err != nil { // one goroutine at a time past here
				log.Fatal(err)
			}
			defer mu.Unlock(ctx)
		}()
	}
	wg.Wait()
	fmt.Println("three goroutines, one at a time")
	// Output: three goroutines, one at a time
}

// A Lock is reentrant and renewed by the watchdog until Unlock. TryLock
// gives up after WithWait; WithLease sets a fixed lease instead of the
// watchdog. Lost closes if the hold is found gone before Unlock.
func Example_tryLock() {
	client, stop := newExampleClient()
	defer stop()
	ctx := context.Background()
	// Shown from here.
	lock := client.Lock("report")                                 // one handle per owner
	ok, err := lock.TryLock(ctx, lockactor.WithWait(time.Second)) // waits up to 1s
	if err != nil || !ok {
		log.Fatal("report is busy: ", err)
	}
	defer lock.Unlock(ctx)
	fmt.Println("writing the report; stop if lock.Lost() closes")
	// Output: writing the report; stop if lock.Lost() closes
}

// A fair lock is granted in the order it was asked for, across every
// Client and process.
func Example_fairLock() {
	client, stop := newExampleClient()
	defer stop()
	ctx := context.Background()
	// Shown from here.
	lock := client.FairLock("printer") // first come, first served, in every process
	if err := lock.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer lock.Unlock(ctx)
	fmt.Println("printing")
	// Output: printing
}

// A fenced lock's token grows with every acquisition; the storage it guards
// refuses writes with a token lower than the highest it has seen.
func Example_fencedLock() {
	client, stop := newExampleClient()
	defer stop()
	ctx := context.Background()
	// Shown from here.
	lock := client.FencedLock("ledger")
	if err := lock.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer lock.Unlock(ctx)
	token := lock.Token() // send it with each write: the storage refuses tokens below the highest it saw
	fmt.Println("holding the ledger with a token:", token != 0)
	// Output: holding the ledger with a token: true
}

// A read-write lock admits many readers or one writer.
func Example_readWriteLock() {
	client, stop := newExampleClient()
	defer stop()
	ctx := context.Background()
	// Shown from here.
	rw := client.ReadWriteLock("catalog")           // one per owner
	if err := rw.ReadLock().Lock(ctx); err != nil { // rw.WriteLock() to write
		log.Fatal(err)
	}
	defer rw.ReadLock().Unlock(ctx)
	fmt.Println("reading the catalog")
	// Output: reading the catalog
}

// A semaphore shares a number of permits between every Client.
func Example_semaphore() {
	client, stop := newExampleClient()
	defer stop()
	ctx := context.Background()
	// Shown from here.
	pool := client.Semaphore("db-connections")
	_, _ = pool.TrySetPermits(ctx, 10) // only the first caller sets the count
	if err := pool.Acquire(ctx, 1); err != nil {
		log.Fatal(err)
	}
	defer pool.Release(ctx, 1)
	n, _ := pool.AvailablePermits(ctx)
	fmt.Println("permits left:", n)
	// Output: permits left: 9
}

// A MultiLock takes several locks together: all of them or none.
func Example_multiLock() {
	client, stop := newExampleClient()
	defer stop()
	ctx := context.Background()
	// Shown from here.
	transfer := lockactor.NewMultiLock(client.Lock("account:1"), client.Lock("account:2"))
	if err := transfer.Lock(ctx); err != nil { // both or neither
		log.Fatal(err)
	}
	defer transfer.Unlock(ctx)
	fmt.Println("moving money between accounts 1 and 2")
	// Output: moving money between accounts 1 and 2
}
