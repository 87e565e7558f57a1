package lockactor_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// The allocation budget of one Lock+Unlock pair over the whole client path
// (handle, actor, pipeline, go-redis), counted in every goroutine of the
// process: at most 40. allocSlack is what go-redis's own
// internals may add without any change of ours: its pool health check
// costs 3 allocations per connection taken (two per pair) and its reply
// reader one per status reply, and both differ between go-redis versions.
const (
	allocBudget = 40
	allocSlack  = 2
)

// TestAllocs_uncontended guards the budget of an uncontended pair against
// a real redis-server, by allocation counts, not timing.
func TestAllocs_uncontended(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	l := c.Lock("allocs-budget")
	ctx := context.Background()
	var err error
	pair := func() {
		if e := lockUnlock(ctx, l); e != nil && err == nil {
			err = e
		}
	}
	for range 200 { // warm up: connections, scripts, the flusher and workers
		pair()
	}
	n := testing.AllocsPerRun(2000, pair)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.0f allocations per uncontended Lock+Unlock pair (budget %d + slack %d)", n, allocBudget, allocSlack)
	if n > allocBudget+allocSlack {
		t.Fatalf("%.0f allocations per uncontended Lock+Unlock pair; the budget is %d (+%d slack for go-redis internals)", n, allocBudget, allocSlack)
	}
}

// TestAllocs_waiters checks that allocations per pair do not grow with the
// number of goroutines waiting on one name: the waiters' queue, hand-offs
// and wakes must cost per grant, not per waiter.
func TestAllocs_waiters(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	srv := redistest.Start(t)
	c := newClient(t, srv.Client(t))
	per := map[int]float64{}
	for _, g := range []int{1, 8, 64} {
		per[g] = allocsPerPair(t, c, "allocs-waiters", g, 2048)
		t.Logf("%d goroutines on one name: %.1f allocations per pair", g, per[g])
	}
	for _, g := range []int{8, 64} {
		if per[g] > allocBudget+allocSlack {
			t.Errorf("%d goroutines: %.1f allocations per pair, above the budget of %d (+%d)", g, per[g], allocBudget, allocSlack)
		}
	}
	// 8 goroutines already queue behind one holder; 8 times as many waiters
	// may not cost more than a quarter more per pair.
	if per[64] > 1.25*per[8] {
		t.Errorf("allocations per pair grow with the waiters: %.1f with 8 goroutines, %.1f with 64", per[8], per[64])
	}
}

// allocsPerPair runs about pairs Lock+Unlock pairs on name from g goroutines,
// one handle each, and returns the process's allocations per pair.
func allocsPerPair(t *testing.T, c *lockactor.Client, name string, g, pairs int) float64 {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	handles := make([]*lockactor.Lock, g)
	for i := range handles {
		handles[i] = c.Lock(name)
	}
	run := func(each int) {
		var wg sync.WaitGroup
		for _, l := range handles {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					if err := lockUnlock(ctx, l); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	each := max(pairs/g, 1)
	run(max(each/8, 1)) // warm up
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	run(each)
	runtime.ReadMemStats(&after)
	if t.Failed() {
		t.FailNow()
	}
	return float64(after.Mallocs-before.Mallocs) / float64(each*g)
}
