package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/lockactor/lockactor/redisio"
)

// foreignListeners is how many foreign listeners a single-server run has:
// two, so that both sometimes listen on one name, and a count finds two
// foreign waiters (a long yield then waits for two releases without a
// note: actors/yield.go).
const foreignListeners = 2

// listenForeign plays a listener that is not a lockactor Client on the
// single-server runs: now and then it subscribes, on an unhooked
// connection of server A, to the channel of one of the Lock names, for a
// second or a few, as a Redisson client's waiter would, and never takes
// the lock. A Client that counts it finds a foreign waiter: its releases
// are then noted, its waiters hold back long after noted releases, and,
// since nobody ever takes those turns, its long waits go quiet (see
// actors/yield.go). i tells the listeners apart (foreignListeners). It
// returns the number of windows it listened in, once the run has stopped.
func (r *runner) listenForeign(seed int64, i int) int {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x666f726569676e+uint64(i)))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	windows := 0
	for {
		if !r.sleepUntil(time.Now().Add(between(time.Second, 3*time.Second))) {
			return windows
		}
		n := rng.IntN(namesPerPrim)
		ps := r.admin["A"].Subscribe(context.Background(), redisio.LockChannel(fmt.Sprintf("lock%d", n)))
		windows++
		if r.foreignOn[n].Add(1) > 1 {
			r.foreignPairs.Add(1)
		}
		stopped := !r.sleepUntil(time.Now().Add(between(time.Second, 4*time.Second)))
		r.foreignOn[n].Add(-1)
		_ = ps.Close()
		if stopped {
			return windows
		}
	}
}
