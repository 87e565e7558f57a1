package actors

import (
	"testing"
)

// TestLockActor_HandleExtend covers a handle's own Extend (Lock.Extend):
// only a fixed-lease hold the actor records and still counts as held is
// extended in Redis; anything else is answered at once, with no call. A
// RedLock coordinator's Extend keeps asking Redis whatever the record says.
func TestLockActor_HandleExtend(t *testing.T) {
	run(t, KindLock, []scenario{
		{name: "a fixed-lease hold is extended in Redis and stays held", steps: holding(
			handleExtend("e", "h", long),
			expect("renew h", done(true)),
			answered("e", "granted"),
			unlock("u", "h"),
			expect("unlock h", reply(released)),
			answered("u", "gone"),
		)},
		{name: "a hold Redis no longer has: not held", steps: holding(
			handleExtend("e", "h", long),
			expect("renew h", done(false)),
			answered("e", "refused"),
			noCall(20*ms),
		)},
		{name: "a watchdog hold: refused without Redis", steps: []step{
			lock("h", "h", 0),
			expect("lock h", reply(granted)),
			answered("h", "granted"),
			handleExtend("e", "h", long),
			answered("e", "watchdog"),
			noCall(20 * ms),
		}},
		{name: "never held: not held without Redis", steps: []step{
			handleExtend("e", "x", long),
			answered("e", "refused"),
			noCall(20 * ms),
		}},
		{name: "released: not held without Redis", steps: holding(
			unlock("u", "h"),
			expect("unlock h", reply(released)),
			answered("u", "gone"),
			handleExtend("e", "h", long),
			answered("e", "refused"),
			noCall(20*ms),
		)},
		{name: "a lease run out by the local clock: not held without Redis", steps: []step{
			lock("h", "h", 100*ms),
			expect("lock h", reply(granted)),
			answered("h", "granted"),
			noCall(120 * ms), // the lease runs out
			handleExtend("e", "h", long),
			answered("e", "refused"),
			noCall(20 * ms),
		}},
		{name: "a reply later than the new lease: not held, and the hold is dropped", steps: holding(
			handleExtend("e", "h", 50*ms),
			expect("renew h", late(70*ms), done(true)),
			answered("e", "refused"),
			handleExtend("e2", "h", long),
			answered("e2", "refused"), // no hold left: answered without Redis
			noCall(20*ms),
		)},
		{name: "released while its renewal waits to leave: the renewal is not sent, the Extend is not held", steps: holding(
			handleExtend("e", "h", long),
			expect("renew h", keep("ext"), staleNow(false)),
			unlock("u", "h"),
			expect("unlock h", reply(released)),
			answered("u", "gone"),
			later("ext", staleNow(true), notSentStale()),
			answered("e", "refused"),
		)},
		{name: "a coordinator's Extend is sent whatever the record says", steps: []step{
			extend("e", "x", long),
			expect("renew x", done(true)),
			answered("e", "granted"),
		}},
	})
}

// TestLockActor_RenewalOfReleasedHold: a watchdog renewal still waiting for
// its pipeline when its hold is released reports itself stale, so redisio
// drops it unsent (a slow reply ahead of it can hold the pipeline past the
// Unlock); while a reentrant hold remains, it stays wanted.
func TestLockActor_RenewalOfReleasedHold(t *testing.T) {
	run(t, KindLock, []scenario{
		{name: "released while the renewal waits: stale", steps: []step{
			lock("h", "h", 0),
			expect("lock h", reply(granted)),
			answered("h", "granted"),
			watchdogTick(),
			expect("renew h", keep("r"), staleNow(false)),
			unlock("u", "h"),
			expect("unlock h", reply(released)),
			answered("u", "gone"),
			later("r", staleNow(true), done(true)),
		}},
		{name: "one of two reentrant holds released: still wanted", steps: []step{
			lock("h", "h", 0),
			expect("lock h", reply(granted)),
			answered("h", "granted"),
			lock("h2", "h", 0),
			expect("lock h", reply(granted)),
			answered("h2", "granted"),
			watchdogTick(),
			expect("renew h", keep("r")),
			unlock("u", "h"),
			expect("unlock h", reply(stillHeld)),
			answered("u", "ok"),
			later("r", staleNow(false), done(true)),
		}},
	})
}
