package torture

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/redisio"
)

// checkFairQueues: once every worker has stopped, every fair lock's queue in
// Redis must drain within fairQueueWait (cancelled waiters leave it).
func (r *runner) checkFairQueues() {
	ctx, cancel := context.WithTimeout(context.Background(), fairQueueWait+2*time.Second)
	defer cancel()
	deadline := time.Now().Add(fairQueueWait)
	for _, name := range fairNames() {
		q := redisio.FairQueue(name)
		var n int64
		var err error
		if !pollUntil(deadline, func() bool { n, err = r.admin["A"].LLen(ctx, q).Result(); return err == nil && n == 0 }) {
			left, _ := r.admin["A"].LRange(ctx, q, 0, -1).Result()
			r.violate(VFairQueue, fmt.Sprintf("%s still holds %d waiter(s) %v after every worker stopped (err %v)", q, n, left, err))
		}
	}
}

// pollUntil calls ok every 50ms until it reports true (then true) or
// deadline has passed (then false).
func pollUntil(deadline time.Time, ok func() bool) bool {
	for !ok() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// fairNames are the names taken as FairLocks: the fair ones, and the shared
// ones, which steps take as Lock, FencedLock or FairLock.
func fairNames() []string { return namesOf("fair", "shared") }

// namesOf are the names the steps take under each prefix: prefix0,
// prefix1, ... (namesPerPrim of each).
func namesOf(prefixes ...string) []string {
	var names []string
	for _, p := range prefixes {
		for i := range namesPerPrim {
			names = append(names, fmt.Sprintf("%s%d", p, i))
		}
	}
	return names
}

// checkSemCounts: no semaphore may ever count more free permits than it
// was set to (the permits held can only lower it), whatever Redis said or
// did not say. It reads every generation's count in Redis (a restart wipes
// them, and is checked just before it): a request applied twice (a
// settlement that answered "did not run" for a Release that had run) leaves
// its extra permits there for good. A permit semaphore's free permits and
// the permits in its deadlines set (held, or ended and not yet given back)
// add up to what it was set to: more means a release or a reclaim counted
// twice.
func (r *runner) checkSemCounts() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for g := int64(0); g <= r.gen.Load(); g++ {
		for i := 0; i < namesPerPrim; i++ {
			for _, name := range []string{fmt.Sprintf("sem%d.g%d", i, g), fmt.Sprintf("permit%d.g%d", i, g)} {
				r.checkSemCount(ctx, name, strings.HasPrefix(name, "permit"))
			}
		}
	}
}

func (r *runner) checkSemCount(ctx context.Context, name string, permits bool) {
	if r.topo.lossy("A/"+name) || r.topo.lossy("B/"+name) {
		return // a lossy failover may have dropped acquires: see Relaxations
	}
	// Both read in one transaction: the workers may still be running.
	var free *redis.StringCmd
	var held *redis.IntCmd
	if _, err := r.admin["A"].TxPipelined(ctx, func(p redis.Pipeliner) error {
		free = p.Get(ctx, name)
		held = p.ZCard(ctx, redisio.PermitTimeouts(name))
		return nil
	}); err != nil {
		return // gone with a restart, or unreadable: nothing to judge
	}
	n, err := strconv.Atoi(free.Val())
	if err != nil {
		return
	}
	what := "free permits"
	if permits {
		n, what = n+int(held.Val()), "free and leased permits"
	}
	if n > r.lim.Permits && r.firstReport("semaphore-count "+name) {
		r.violate(VPermits, fmt.Sprintf("A/%s: Redis counts %d %s, more than the %d it was set to (at +%.3fs)",
			name, n, what, r.lim.Permits, time.Since(r.start).Seconds()))
	}
}

// firstReport reports whether key is reported for the first time.
func (r *runner) firstReport(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reported == nil {
		r.reported = map[string]bool{}
	}
	first := !r.reported[key]
	r.reported[key] = true
	return first
}
