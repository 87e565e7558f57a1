package actors

import (
	"testing"
	"time"

	"github.com/lockactor/lockactor/redisio"
)

// TestBackoffSequences pins each retry schedule to the millisecond, on
// the virtual clock: the first retry, the doubling, and the ceiling.
func TestBackoffSequences(t *testing.T) {
	t.Run("lock", func(t *testing.T) {
		run(t, KindLock, []scenario{
			{name: "grants back past their lease: retries 1, 2, 4 ms after each", steps: []step{
				lock("w", "w", ms),
				expect("lock w", late(2*ms), reply(granted)),
				expect("unlock w", reply(released)),
				callAfter(1*ms, "lock w", late(2*ms), reply(granted)),
				expect("unlock w", reply(released)),
				callAfter(2*ms, "lock w", late(2*ms), reply(granted)),
				expect("unlock w", reply(released)),
				callAfter(4*ms, "lock w", reply(granted)),
				answered("w", "granted"),
			}},
			{name: "a release Redis keeps refusing: 20, 40, 80 ... ms, capped at a second", steps: holding(
				unlock("u", "h"),
				expectNow("unlock h", fail(errBusy)),
				callAfter(20*ms, "unlock h", fail(errBusy)),
				answered("u", failed(errBusy)),
				callAfter(40*ms, "unlock h", fail(errBusy)),
				callAfter(80*ms, "unlock h", fail(errBusy)),
				callAfter(160*ms, "unlock h", fail(errBusy)),
				callAfter(320*ms, "unlock h", fail(errBusy)),
				callAfter(640*ms, "unlock h", fail(errBusy)),
				callAfter(time.Second, "unlock h", fail(errBusy)),
				callAfter(time.Second, "unlock h", reply(released)),
				noCall(time.Minute),
			)},
			{name: "a settlement Redis does not answer: 10, 20, 40 ms", steps: []step{
				tryLock("w", "w", long),
				expect("lock w", lose(false, granted)),
				expect("resolve lock w", settleErr(errLost)),
				callAfter(10*ms, "resolve lock w", settleErr(errLost)),
				callAfter(20*ms, "resolve lock w", settleErr(errLost)),
				callAfter(40*ms, "resolve lock w", settle(redisio.NotRun, redisio.Reply{})),
				answered("w", failed(errLost)),
			}},
		})
	})
	t.Run("fair", func(t *testing.T) {
		run(t, KindFair, []scenario{
			{name: "a queued waiter told its turn is due any moment: 20, 40, 80 ms", steps: []step{
				lock("w", "w", long),
				expect("fair_lock w", reply(refused(0))),
				callAfter(20*ms, "fair_lock w", reply(refused(0))),
				callAfter(40*ms, "fair_lock w", reply(refused(0))),
				callAfter(80*ms, "fair_lock w", reply(granted)),
				answered("w", "granted"),
			}},
			{name: "a queued waiter retries at the estimate it was given", steps: []step{
				lock("w", "w", long),
				expect("fair_lock w", reply(refused(300*ms))),
				callAfter(300*ms, "fair_lock w", reply(granted)),
				answered("w", "granted"),
			}},
		})
	})
}

// TestYieldWindow: a queue woken by a release message while other
// processes may listen holds back yieldWindow, so that a peer slower than
// an actor gets its turn; once other processes have won its yields for
// yieldFor, it tries at once.
func TestYieldWindow(t *testing.T) {
	ch := redisio.LockChannel("x")
	queued := []step{
		lock("w", "w", long),
		expect("lock w", reply(refused(10*time.Second))),
		listening(ch, true),
	}
	run(t, KindLock, []scenario{
		{name: "the queue tries yieldWindow after the message", steps: append(queued,
			publish(ch, "0"),
			callAfter(yieldWindow, "lock w", reply(granted)),
			answered("w", "granted"),
		)},
		{name: "messages during the window do not move its end", steps: append(queued,
			publish(ch, "0"),
			noCall(yieldWindow-ms),
			publish(ch, "0"), // another Client's short run ended
			callAfter(ms, "lock w", reply(granted)),
			answered("w", "granted"),
		)},
		{name: "yields lost for less than yieldFor: still a window; then at once", steps: append(queued,
			publish(ch, "0"),
			callAfter(yieldWindow, "lock w", reply(refused(10*time.Second))), // another took it
			publish(ch, "0"),
			callAfter(yieldWindow, "lock w", reply(refused(10*time.Second))), // again
			publish(ch, "0"),
			callAfter(yieldWindow, "lock w", reply(refused(10*time.Second))), // other Clients' runs
			noCall(yieldFor-2*yieldWindow-ms),
			publish(ch, "0"), // yieldFor-1ms since the first loss
			callAfter(yieldWindow, "lock w", reply(refused(10*time.Second))),
			publish(ch, "0"),
			expectNow("lock w", reply(granted)), // no window now
			answered("w", "granted"),
		)},
		{name: "a won yield starts the count again", steps: append(queued,
			publish(ch, "0"),
			callAfter(yieldWindow, "lock w", reply(refused(10*time.Second))),
			noCall(yieldFor),
			publish(ch, "0"),
			expectNow("lock w", reply(granted)),
			answered("w", "granted"),
			unlock("uw", "w"),
			expect("unlock w", reply(released)),
			answered("uw", "gone"),
			lock("w2", "w2", long),
			expect("lock w2", reply(refused(10*time.Second))),
			publish(ch, "0"),
			callAfter(yieldWindow, "lock w2", reply(granted)), // a window again
			answered("w2", "granted"),
		)},
	})
}

// TestRecheck: a waiter that no message may reach (a lost publish, a
// server that refused it) checks again every SemaphoreRecheck, exactly.
func TestRecheck(t *testing.T) {
	const every = 250 * ms
	t.Run("semaphore", func(t *testing.T) {
		run(t, KindSemaphore, []scenario{
			{name: "a refused waiter asks again every recheck period, and no sooner", recheck: every, steps: []step{
				acquireN("a", 1),
				expectNow("sem_acquire 1", reply(semNo)),
				callAfter(every, "sem_acquire 1", reply(semNo)),
				callAfter(every, "sem_acquire 1", reply(semOK)),
				answered("a", "granted"),
				noCall(time.Minute),
			}},
		})
	})
	t.Run("countdown", func(t *testing.T) {
		run(t, KindCountDown, []scenario{
			{name: "an awaiter reads the count again every recheck period", recheck: every, steps: []step{
				await("w"),
				expectNow("cdl_get", count(1)),
				callAfter(every, "cdl_get", count(1)),
				callAfter(every, "cdl_get", count(0)),
				answered("w", "granted"),
			}},
		})
	})
}
