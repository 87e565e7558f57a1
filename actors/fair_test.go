package actors

import (
	"testing"
	"time"

	"github.com/lockactor/lockactor/redisio"
)

// TestFairActor covers the fair lock's waiters (dueWaiter: each owner
// retries at the script's estimate, or at once on news on its own channel)
// and its settle paths: a stale grant given back, an owed release holding
// back its owner's next attempt, a withdrawn or unknown owner taken out of
// the Redis queue.
func TestFairActor(t *testing.T) {
	const wait = 30 * time.Second // a wait estimate no row reaches
	run(t, KindFair, []scenario{
		{name: "a queued owner waits for its estimate, and tries at once on news", steps: []step{
			lock("w", "w", long),
			expect("fair_lock w", reply(refused(wait))),
			noCall(5 * ms),
			publish(fairChannel("w"), "0"),
			expect("fair_lock w", reply(granted)),
			answered("w", "granted"),
			listening(fairChannel("w"), false),
		}},
		{name: "an estimate sent before news is stale: the owner tries again at once", steps: []step{
			lock("w", "w", long),
			expect("fair_lock w", reply(refused(wait))),
			publish(fairChannel("w"), "0"),
			expect("fair_lock w", keep("try")),
			publish(fairChannel("w"), "0"),
			later("try", reply(refused(wait))),
			expect("fair_lock w", reply(granted)),
			answered("w", "granted"),
		}},
		{name: "a grant with some of its lease left is the caller's", steps: []step{
			lock("w", "w", 60*ms),
			expect("fair_lock w", late(25*ms), reply(granted)),
			answered("w", "granted"),
		}},
		{name: "a grant past its lease is given back and the owner queues again", steps: []step{
			lock("w", "w", 20*ms),
			expect("fair_lock w", late(25*ms), reply(granted)),
			expect("fair_unlock w", reply(released)),
			expect("fair_lock w", reply(refused(wait))),
			unanswered("w"),
		}},
		{name: "waiters of one Client that ask while a script is in flight join the queue in the order they asked", steps: []step{
			lock("a", "a", long),
			expect("fair_lock a", keep("first")),
			lock("b", "b", long),
			lock("c", "c", long),
			lock("d", "d", long),
			lock("e", "e", long),
			later("first", reply(refused(wait))),
			expect("fair_lock b", reply(refused(wait))),
			expect("fair_lock c", reply(refused(wait))),
			expect("fair_lock d", reply(refused(wait))),
			expect("fair_lock e", reply(refused(wait))),
		}},
		{name: "a later waiter granted from the queue: an earlier one, purged from it, tries at once", steps: []step{
			lock("a", "a", long),
			expect("fair_lock a", reply(refused(wait))),
			lock("b", "b", long),
			expect("fair_lock b", reply(granted)),
			answered("b", "granted"),
			expect("fair_lock a", reply(refused(wait))),
			unanswered("a"),
		}},
		{name: "a re-lock of the owner waits for its owed release", steps: []step{
			lock("h", "h", long),
			expect("fair_lock h", reply(granted)),
			answered("h", "granted"),
			unlock("u", "h"),
			expect("fair_unlock h", keep("rel")),
			lock("h2", "h", long),
			later("rel", lose(false, released)),
			expect("resolve fair_unlock h", settle(redisio.NotRun, redisio.Reply{})),
			expect("fair_unlock h", reply(released)), // not "fair_lock h"
			answered("u", "gone"),
			expect("fair_lock h", reply(granted)),
			answered("h2", "granted"),
		}},
		{name: "a queued attempt that ran: granted from the record", steps: []step{
			lock("w", "w", long),
			expect("fair_lock w", lose(true, granted)),
			expect("resolve fair_lock w", settle(redisio.Ran, granted)),
			answered("w", "granted"),
		}},
		{name: "a withdrawn owner is taken out of the Redis queue", steps: []step{
			lock("w", "w", long),
			expect("fair_lock w", reply(refused(wait))),
			abandon("w", "w"),
			expect("fair_cancel w", done(true)),
			listening(fairChannel("w"), false),
		}},
		{name: "a TryLock of unknown outcome: the caller hears the error, the owner is cancelled", latchKeep: ms, fairWait: ms, steps: []step{
			tryLock("w", "w", ms),
			expect("fair_lock w", lose(true, granted)),
			expect("resolve fair_lock w", late(3*ms), settle(redisio.NoRecord, redisio.Reply{})),
			answered("w", failed(errLost)),
			expect("fair_cancel w", done(true)),
		}},
	})
}
