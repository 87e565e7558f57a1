package actors

import (
	"testing"
	"time"

	"github.com/lockactor/lockactor/redisio"
)

// TestSemaphoreActor covers the semaphore's settle paths and counting. The
// fake counts the permits in Redis as the calls that ran left them; a row
// checks that count against what the callers were told. Where the outcome
// is unknown the count may end lower than the callers hold, never higher
// (a Release sent again after it had run once would mint permits).
func TestSemaphoreActor(t *testing.T) {
	run(t, KindSemaphore, []scenario{
		{name: "a release Redis refuses for good is answered with the error and never sent again", steps: []step{
			releaseN("r", 1),
			expect("sem_add 1", fail(errWrongType)),
			answered("r", failed(errWrongType)),
			noCall(150 * ms), // a retry would come after 20ms, then 40ms, 80ms...
		}},
		{name: "a release that fails for now is sent again", steps: []step{
			releaseN("r", 1),
			expect("sem_add 1", fail(errBusy)),
			answered("r", failed(errBusy)),
			expect("sem_add 1", reply(semOK)),
			permits(1),
		}},
		{name: "an acquire that ran: granted from the record", permits: 2, steps: []step{
			acquireN("a", 2),
			expect("sem_acquire 2", lose(true, semOK)),
			expect("resolve sem_acquire 2", settle(redisio.Ran, semOK)),
			answered("a", "granted"),
			permits(0),
		}},
		{name: "an acquire that did not run: sent again", permits: 2, steps: []step{
			acquireN("a", 2),
			expect("sem_acquire 2", lose(false, semOK)),
			expect("resolve sem_acquire 2", settle(redisio.NotRun, redisio.Reply{})),
			expect("sem_acquire 2", reply(semOK)),
			answered("a", "granted"),
			permits(0),
		}},
		{name: "an acquire of unknown outcome: the caller hears the error, permits err fewer", latchKeep: ms, permits: 2, steps: []step{
			acquireN("a", 2),
			expect("sem_acquire 2", lose(true, semOK)),
			expect("resolve sem_acquire 2", late(2*ms), settle(redisio.NoRecord, redisio.Reply{})),
			answered("a", failed(errLost)),
			noCall(30 * ms),
			permits(0),
		}},
		{name: "a settlement out of reach: the caller hears the error, permits found taken go back", permits: 2, steps: []step{
			acquireN("a", 1),
			expect("sem_acquire 1", lose(true, semOK)),
			expect("resolve sem_acquire 1", settleErr(errLost)),
			answered("a", failed(errLost)),
			expect("resolve sem_acquire 1", settle(redisio.Ran, semOK)),
			expect("sem_add 1", reply(semOK)),
			permits(2),
		}},
		{name: "a TryAcquire behind a settlement out of reach hears its error", permits: 2, steps: []step{
			acquireN("a", 1),
			expect("sem_acquire 1", lose(true, semOK)),
			tryAcquireN("b", 1),
			expect("resolve sem_acquire 1", settleErr(errLost)),
			answered("a", failed(errLost)),
			expect("resolve sem_acquire 1", settleErr(errLost)),
			answered("b", failed(errLost)),
			expect("resolve sem_acquire 1", settle(redisio.Ran, semOK)),
			expect("sem_add 1", reply(semOK)),
			permits(2),
		}},
		{name: "permits granted without the replicas go back", permits: 2, steps: []step{
			tryAcquireN("a", 2),
			expect("sem_acquire 2", reply(unsynced(semOK))),
			answered("a", failed(redisio.ErrNotReplicated)),
			expect("sem_add 2", reply(semOK)),
			permits(2),
		}},
		{name: "permits granted to a caller gone go back", permits: 2, steps: []step{
			acquireN("a", 2),
			expect("sem_acquire 2", keep("acq")),
			abandon("a", ""),
			later("acq", reply(semOK)),
			expect("sem_add 2", reply(semOK)),
			permits(2),
		}},
		{name: "a release that did not run: sent again", permits: 2, steps: []step{
			releaseN("r", 1),
			expect("sem_add 1", lose(false, semOK)),
			expect("resolve sem_add 1", settle(redisio.NotRun, redisio.Reply{})),
			expect("sem_add 1", reply(semOK)),
			answered("r", "ok"),
			permits(3),
		}},
		{name: "a release of unknown outcome that ran is never sent again", latchKeep: ms, permits: 2, steps: []step{
			releaseN("r", 1),
			expect("sem_add 1", lose(true, semOK)),
			expect("resolve sem_add 1", late(2*ms), settle(redisio.NoRecord, redisio.Reply{})),
			answered("r", failed(errLost)),
			noCall(30 * ms),
			permits(3),
		}},
		{name: "a release of unknown outcome that did not run leaves a permit fewer", latchKeep: ms, permits: 2, steps: []step{
			releaseN("r", 1),
			expect("sem_add 1", lose(false, semOK)),
			expect("resolve sem_add 1", late(2*ms), settle(redisio.NoRecord, redisio.Reply{})),
			answered("r", failed(errLost)),
			noCall(30 * ms),
			permits(2),
		}},
		{name: "several waiters of the Client are served in the order they asked", steps: []step{
			acquireN("a", 2),
			expectNow("sem_acquire 2", reply(semNo)),
			acquireN("b", 1),
			acquireN("c", 1),
			noCall(time.Second), // the head was refused: nobody tries before news
			publish(redisio.SemaphoreChannel("x"), "2"),
			expectNow("sem_acquire 2", reply(semOK)),
			answered("a", "granted"),
			expectNow("sem_acquire 1", reply(semNo)),
			unanswered("b"),
			publish(redisio.SemaphoreChannel("x"), "1"),
			expectNow("sem_acquire 1", reply(semOK)),
			answered("b", "granted"),
			expectNow("sem_acquire 1", reply(semNo)), // the next head tries after every grant
			unanswered("c"),
		}},
		{name: "a refused head waits until a message counts enough permits", steps: []step{
			acquireN("a", 3),
			expect("sem_acquire 3", reply(semNo)),
			publish(redisio.SemaphoreChannel("x"), "2"),
			noCall(5 * ms),
			publish(redisio.SemaphoreChannel("x"), "3"),
			expect("sem_acquire 3", reply(semOK)),
			answered("a", "granted"),
		}},
	})
}
