package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/lockactor/lockactor/redisio"
)

// listenForeign plays a listener that is not a lockactor Client on the
// single-server runs: now and then it subscribes, on an unhooked
// connection of server A, to the channel of one of the Lock names, for a
// second or a few, as a Redisson client's waiter would, and never takes
// the lock. A Client that counts it finds a foreign waiter: its releases
// are then noted, its waiters hold back long after noted releases, and,
// since nobody ever takes those turns, its long waits go quiet (see
// actors/yield.go). It returns the number of windows it listened in, once
// the run has stopped.
func (r *runner) listenForeign(seed int64) int {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x666f726569676e))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	windows := 0
	for {
		if !r.sleepUntil(time.Now().Add(between(time.Second, 3*time.Second))) {
			return windows
		}
		name := fmt.Sprintf("lock%d", rng.IntN(namesPerPrim))
		ps := r.admin["A"].Subscribe(context.Background(), redisio.LockChannel(name))
		windows++
		stopped := !r.sleepUntil(time.Now().Add(between(time.Second, 4*time.Second)))
		_ = ps.Close()
		if stopped {
			return windows
		}
	}
}
