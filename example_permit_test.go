package lockactor_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockactor/lockactor"
)

// Every permit has an id and a lease: a permit its holder never gives back
// (the process died) returns to the pool when its lease ends.
func ExampleClient_PermitSemaphore() {
	client, stop := newExampleClient()
	defer stop()
	ctx := context.Background()
	// Shown from here.
	workers := client.PermitSemaphore("render-slots")
	_, _ = workers.TrySetPermits(ctx, 1)
	id, _ := workers.Acquire(ctx, 200*time.Millisecond) // the lease: Redis takes it back then
	_, ok, _ := workers.TryAcquire(ctx, time.Minute, 0)
	fmt.Println("second slot:", ok)
	// The holder never releases; a waiter gets the slot when the lease ends.
	_, ok, _ = workers.TryAcquire(ctx, time.Minute, 2*time.Second)
	fmt.Println("after the lease:", ok)
	err := workers.Release(ctx, id) // too late: the permit has gone back
	fmt.Println("late release:", errors.Is(err, lockactor.ErrNotHeld))
	// Output:
	// second slot: false
	// after the lease: true
	// late release: true
}
