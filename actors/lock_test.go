package actors

import (
	"testing"
	"time"

	"github.com/lockactor/lockactor/redisio"
)

// long is a lease no row outlives: grants under it are never stale.
const long = time.Minute

// holding is the start of rows where h holds the lock with a long lease.
func holding(rest ...step) []step {
	return append([]step{
		lock("h", "h", long),
		expect("lock h", reply(granted)),
		answered("h", "granted"),
	}, rest...)
}

// TestLockActor_Acquire covers the acquire script's replies: in time, past
// the lease (stale: given back, and retried with backoff), unconfirmed by
// replicas, and refused by a Redis error.
func TestLockActor_Acquire(t *testing.T) {
	run(t, KindLock, []scenario{
		{name: "TryLock granted in time", steps: []step{
			tryLock("w", "w", long),
			expect("lock w", reply(granted)),
			answered("w", "granted"),
		}},
		{name: "TryLock refused", steps: []step{
			tryLock("w", "w", long),
			expect("lock w", reply(refused(10*time.Second))),
			answered("w", "refused"),
		}},
		{name: "TryLock granted past its lease is given back", steps: []step{
			tryLock("w", "w", 4*ms),
			expect("lock w", late(5*ms), reply(granted)),
			answered("w", "refused"),
			expect("unlock w", reply(released)),
		}},
		{name: "a grant with some of its lease left is the caller's", steps: []step{
			lock("w", "w", 60*ms),
			expect("lock w", late(25*ms), reply(granted)),
			answered("w", "granted"),
		}},
		{name: "a queued grant past its lease is given back and the waiter tries again", steps: []step{
			lock("w", "w", 20*ms),
			expect("lock w", late(25*ms), reply(granted)),
			expect("unlock w", reply(released)),
			expect("lock w", reply(refused(10*time.Second))),
			unanswered("w"),
		}},
		{name: "grants that keep coming back past their lease are retried with backoff, not at Redis's pace", steps: []step{
			lock("w", "w", ms),
			expect("lock w", late(2*ms), reply(granted)),
			expect("unlock w", reply(released)),
			expect("lock w", late(2*ms), reply(granted)),
			expect("unlock w", reply(released)),
			expect("lock w", late(2*ms), reply(granted)),
			expect("unlock w", reply(released)),
			noCall(3 * ms), // the third retry waits 4ms (1, 2, 4: see staleMin)
			expect("lock w", reply(granted)),
			answered("w", "granted"),
		}},
		{name: "TryLock granted without the replicas is given back", steps: []step{
			tryLock("w", "w", long),
			expect("lock w", reply(unsynced(granted))),
			answered("w", failed(redisio.ErrNotReplicated)),
			expect("unlock w", reply(released)),
		}},
		{name: "a Redis error on the queue's attempt answers every waiter", steps: []step{
			lock("a", "a", long),
			expect("lock a", keep("a")),
			lock("b", "b", long),
			later("a", fail(errBusy)),
			answered("a", failed(errBusy)),
			answered("b", failed(errBusy)),
		}},
	})
}

// TestLockActor_Handoff covers the release that hands the lock to the
// next local waiter. A hand-off whose reply comes back past the waiter's
// lease is given back, not granted.
func TestLockActor_Handoff(t *testing.T) {
	run(t, KindLock, []scenario{
		{name: "in time: the waiter is granted", steps: holding(
			lock("w", "w", long),
			noCall(5*ms), // the holder's lease refuses it: no attempt
			unlock("u", "h"),
			expect("handoff h>w", reply(handedOver)),
			answered("u", "gone"),
			answered("w", "granted"),
		)},
		{name: "several waiters of the Client: each release hands to the next, in the order they asked", steps: holding(
			lock("a", "a", long),
			lock("b", "b", long),
			lock("c", "c", long),
			noCall(time.Second), // the holder's lease refuses them all: no attempt
			unlock("uh", "h"),
			expectNow("handoff h>a", reply(handedOver)),
			answered("a", "granted"),
			unanswered("b"),
			unlock("ua", "a"),
			expectNow("handoff a>b", reply(handedOver)),
			answered("b", "granted"),
			unanswered("c"),
			unlock("ub", "b"),
			expectNow("handoff b>c", reply(handedOver)),
			answered("c", "granted"),
			unlock("uc", "c"),
			expectNow("unlock c", reply(released)),
			answered("uc", "gone"),
		)},
		{name: "past the waiter's lease: given back, the waiter stays queued", steps: holding(
			lock("w", "w", 20*ms),
			unlock("u", "h"),
			expect("handoff h>w", late(25*ms), reply(handedOver)),
			answered("u", "gone"),
			expect("unlock w", reply(released)),
			expect("lock w", reply(refused(10*time.Second))),
			unanswered("w"),
		)},
		{name: "without the replicas: given back, the waiter stays queued", steps: holding(
			lock("w", "w", long),
			unlock("u", "h"),
			expect("handoff h>w", reply(unsynced(handedOver))),
			answered("u", "gone"),
			expect("unlock w", reply(released)),
			expect("lock w", reply(refused(10*time.Second))),
			unanswered("w"),
		)},
	})
}

// TestLockActor_OwedRelease covers a release Redis did not confirm. While
// it is owed, no acquire of the same owner goes out: the hash field is the
// same for both holds, so the old release would free the new one (issue
// 17, item 2). A release that keeps failing answers its caller on the
// second failure, and ErrNotHeld once its hold's lease has surely run out
// (item 6).
func TestLockActor_OwedRelease(t *testing.T) {
	run(t, KindLock, []scenario{
		{name: "a hand-off passes over an owner that owes a release", steps: holding(
			unlock("u", "h"),
			expect("unlock h", fail(errBusy)),
			expect("unlock h", fail(errBusy)),
			answered("u", failed(errBusy)),
			expect("unlock h", fail(errBusy)),
			expect("unlock h", fail(errBusy)),
			expect("unlock h", fail(errBusy)), // the next try is 320ms away
			tryLock("x", "x", long),
			expect("lock x", reply(granted)),
			answered("x", "granted"),
			lock("h2", "h", long), // queued behind x
			unlock("ux", "x"),
			// Handed to h, the lock would then be freed by h's owed
			// release, with h2 told it holds it.
			expect("unlock x", reply(released)), // not "handoff x>h"
			answered("ux", "gone"),
			expect("unlock h", reply(released)),
			expect("lock h", reply(granted)),
			answered("h2", "granted"),
		)},
		{name: "a re-lock of the owner waits for its owed release", steps: holding(
			unlock("u", "h"),
			expect("unlock h", keep("rel")),
			lock("h2", "h", long),
			later("rel", lose(false, released)),
			expect("resolve unlock h", settle(redisio.NotRun, redisio.Reply{})),
			// A release message (someone's) clears what the old grant
			// said of the holder: only the owed release holds h2 back.
			publish(redisio.LockChannel("x"), "0"),
			expect("unlock h", reply(released)), // not "lock h"
			answered("u", "gone"),
			expect("lock h", reply(granted)),
			answered("h2", "granted"),
		)},
		{name: "a re-TryLock of the owner waits for its owed release", steps: holding(
			unlock("u", "h"),
			expect("unlock h", lose(false, released)),
			tryLock("h2", "h", long),
			expect("resolve unlock h", settle(redisio.NotRun, redisio.Reply{})),
			expect("unlock h", reply(released)),
			answered("u", "gone"),
			expect("lock h", reply(granted)),
			answered("h2", "granted"),
		)},
		{name: "lost twice: the caller hears the error on the second, the release goes on", steps: holding(
			unlock("u", "h"),
			expect("unlock h", lose(false, released)),
			expect("resolve unlock h", settle(redisio.NotRun, redisio.Reply{})),
			expect("unlock h", lose(false, released)),
			unanswered("u"),
			expect("resolve unlock h", settle(redisio.NotRun, redisio.Reply{})),
			answered("u", failed(errLost)),
			expect("unlock h", reply(released)),
		)},
		{name: "refused twice by Redis: the caller hears the error on the second", steps: holding(
			unlock("u", "h"),
			expect("unlock h", fail(errBusy)),
			expect("unlock h", fail(errBusy)),
			answered("u", failed(errBusy)),
			expect("unlock h", reply(released)),
		)},
		{name: "refused for good by Redis (the name holds another kind's data): the caller hears why, nothing is sent again", steps: holding(
			unlock("u", "h"),
			expect("unlock h", fail(errWrongType)),
			answered("u", failed(errWrongType)),
			noCall(100*ms),
		)},
		{name: "once the hold's lease has surely run out: ErrNotHeld, and nothing more is sent", steps: holding(
			extend("e", "h", ms), // Redis now lets the hold go within 1ms
			expect("renew h", done(true)),
			answered("e", "granted"),
			unlock("u", "h"),
			expect("unlock h", lose(false, released)),
			expect("resolve unlock h", late(2*ms), settle(redisio.NotRun, redisio.Reply{})),
			answered("u", "notheld"),
			noCall(50*ms),
		)},
	})
}

// TestLockActor_Settlement covers the settlement (latch_resolve) of a
// request whose reply was lost: it ran, it did not, or its record is gone,
// which means "did not run" only while a record of it would still live;
// past that nobody can tell.
func TestLockActor_Settlement(t *testing.T) {
	run(t, KindLock, []scenario{
		{name: "acquire ran: granted from the record", steps: []step{
			tryLock("w", "w", long),
			expect("lock w", lose(true, granted)),
			expect("resolve lock w", settle(redisio.Ran, granted)),
			answered("w", "granted"),
		}},
		{name: "acquire did not run: sent again", steps: []step{
			tryLock("w", "w", long),
			expect("lock w", lose(false, granted)),
			expect("resolve lock w", settle(redisio.NotRun, redisio.Reply{})),
			expect("lock w", reply(granted)),
			answered("w", "granted"),
		}},
		{name: "acquire without a record while one would live: sent again", steps: []step{
			tryLock("w", "w", long),
			expect("lock w", lose(false, granted)),
			expect("resolve lock w", settle(redisio.NoRecord, redisio.Reply{})),
			expect("lock w", reply(granted)),
			answered("w", "granted"),
		}},
		{name: "acquire without a record past its life: unknown, the caller hears the error", latchKeep: ms, steps: []step{
			tryLock("w", "w", ms),
			expect("lock w", lose(true, granted)),
			expect("resolve lock w", late(3*ms), settle(redisio.NoRecord, redisio.Reply{})),
			answered("w", failed(errLost)),
		}},
		{name: "queued acquire did not run: it stays queued and tries again", steps: []step{
			lock("w", "w", long),
			expect("lock w", lose(false, granted)),
			expect("resolve lock w", settle(redisio.NotRun, redisio.Reply{})),
			expect("lock w", reply(granted)),
			answered("w", "granted"),
		}},
		{name: "settlement out of reach: the caller hears the error; a grant found later goes back", steps: []step{
			tryLock("w", "w", long),
			expect("lock w", lose(true, granted)),
			expect("resolve lock w", settleErr(errLost)),
			answered("w", failed(errLost)),
			expect("resolve lock w", settle(redisio.Ran, granted)),
			expect("unlock w", reply(released)),
		}},
		{name: "release ran: the caller hears it", steps: holding(
			unlock("u", "h"),
			expect("unlock h", lose(true, released)),
			expect("resolve unlock h", settle(redisio.Ran, released)),
			answered("u", "gone"),
		)},
		{name: "release without a record while one would live: sent again", steps: holding(
			unlock("u", "h"),
			expect("unlock h", lose(false, released)),
			expect("resolve unlock h", settle(redisio.NoRecord, redisio.Reply{})),
			expect("unlock h", reply(released)),
			answered("u", "gone"),
		)},
		{name: "release without a record past its life: unknown, the caller hears the error, never sent again", latchKeep: ms, steps: holding(
			extend("e", "h", ms),
			expect("renew h", done(true)),
			unlock("u", "h"),
			expect("unlock h", lose(true, released)),
			expect("resolve unlock h", late(3*ms), settle(redisio.NoRecord, redisio.Reply{})),
			answered("u", failed(errLost)),
			noCall(50*ms),
		)},
	})
}

// TestLockActor_Outage: while the settlement of a lost reply keeps failing,
// the ledger lets nothing else out for the name, so an Unlock was neither
// tried nor answered, and a TryLock not attempted, for as long as Redis
// stayed out of reach (with context.Background(), until it came back).
// From the second failed settlement on, such callers hear its error; the
// release stays owed and goes out once Redis answers.
func TestLockActor_Outage(t *testing.T) {
	run(t, KindLock, []scenario{
		{name: "an Unlock during a failing settlement is answered, its release sent later", steps: holding(
			tryLock("w", "w", long),
			expect("lock w", lose(false, granted)),
			unlock("u", "h"),
			expect("resolve lock w", settleErr(errLost)),
			answered("w", failed(errLost)),
			expect("resolve lock w", settleErr(errLost)),
			answered("u", failed(errLost)),
			expect("resolve lock w", settle(redisio.NotRun, redisio.Reply{})),
			expect("unlock h", reply(released)),
		)},
		{name: "a TryLock during a failing settlement is answered", steps: holding(
			tryLock("w", "w", long),
			expect("lock w", lose(false, granted)),
			tryLock("v", "v", long),
			expect("resolve lock w", settleErr(errLost)),
			expect("resolve lock w", settleErr(errLost)),
			answered("v", failed(errLost)),
			expect("resolve lock w", settle(redisio.NotRun, redisio.Reply{})),
			noCall(50*ms),
		)},
	})
}
