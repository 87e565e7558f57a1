package lockactor_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"

	"github.com/lockactor/lockactor"
)

// A Mutex is shared by goroutines the way a sync.Mutex is: here four of
// them take turns on one Mutex, and a Lock handle of the name (another
// owner, as another process's would be) waits for all of them.
func ExampleClient_Mutex() {
	client, stop := newExampleClient()
	defer stop()
	ctx := context.Background()
	// Shown from here.
	mu := client.Mutex("ledger") // store it once, like a sync.Mutex field
	var wg sync.WaitGroup
	total := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := mu.Lock(ctx); err != nil { // waits while another goroutine holds it
				log.Fatal(err)
			}
			defer mu.Unlock(ctx) // any goroutine may unlock the current hold
			total++              // one goroutine at a time, in every process
		}()
	}
	wg.Wait()
	fmt.Println("total:", total)

	_ = mu.Lock(ctx)
	ok, _ := client.Lock("ledger").TryLock(ctx) // another owner
	fmt.Println("another owner while the Mutex holds:", ok)
	_ = mu.Unlock(ctx)
	fmt.Println("Unlock with nothing held:", errors.Is(mu.Unlock(ctx), lockactor.ErrNotHeld))
	// Output:
	// total: 4
	// another owner while the Mutex holds: false
	// Unlock with nothing held: true
}

// An Unlock whose ctx has ended still gives the hold up: the release goes
// on in the background, and the error says so.
func ExampleErrReleasePending() {
	client, stop := newExampleClient()
	defer stop()
	jobCtx, cancel := context.WithCancel(context.Background())
	lock := client.Lock("job:7")
	if err := lock.Lock(jobCtx); err != nil {
		log.Fatal(err)
	}
	// Shown from here.
	cancel() // the job ran out of time
	if err := lock.Unlock(jobCtx); err != nil && !errors.Is(err, lockactor.ErrReleasePending) {
		log.Print(err) // a real failure; a pending release is not one
	}
	// Output:
}
