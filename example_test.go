package lockactor_test

import (
	"context"
	"fmt"

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
