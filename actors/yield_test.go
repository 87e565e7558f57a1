package actors

import (
	"testing"
	"time"

	"github.com/lockactor/lockactor/redisio"
)

// publishNoted delivers a lockactor Client's release message: its note on
// the channel's ListenerMark (saying ms), then the message.
func publishNoted(channel, ms string) step {
	return func(h *harness) {
		publish(redisio.ListenerMark(channel), ms)(h)
		publish(channel, "0")(h)
	}
}

// TestForeignYield: a listener on the lock's channel that is not a
// lockactor Client (more connections on the channel than on its
// ListenerMark) is a foreign waiter; while one is known, a Client's
// releases carry a note, and a queue holds back after a noted release
// until a release without one (the foreign waiter's) or foreignWindow.
func TestForeignYield(t *testing.T) {
	ch := redisio.LockChannel("x")
	mark := redisio.ListenerMark(ch)
	// After a run whose count found all listeners, ours of them, p1 waits
	// for the run's release message; with a foreign one, the release is
	// noted.
	after := func(all, ours int64, rest ...step) []step {
		steps := relayRunCounted(foreignCount(all, ours), all > 1 || all < 0, all > ours)
		if all > ours {
			steps[len(steps)-2] = expect("unlock_noted p0", reply(released))
		}
		return append(steps, rest...)
	}
	// queued has w refused, waiting for a message.
	queued := []step{
		lock("w", "w", long),
		expect("lock w", reply(refused(10*time.Second))),
		listening(ch, true),
		listening(mark, true),
	}
	// again has p1 release (noted), come back refused, and hear a noted
	// release message.
	again := func(label string) []step {
		return []step{
			unlock("u"+label, "p1"),
			expect("unlock_noted p1", reply(released)),
			answered("u"+label, "gone"),
			lock(label, "p1", 0),
			expect("lock p1", reply(refused(10*time.Second))),
			publishNoted(ch, "900"),
		}
	}
	// handOn has w, granted, release (its script named by release) and
	// v come and be refused, waiting for a message.
	handOn := func(release string) []step {
		return []step{
			answered("w", "granted"),
			unlock("uw", "w"),
			expect(release, reply(released)),
			answered("uw", "gone"),
			lock("v", "v", long),
			expect("lock v", reply(refused(10*time.Second))),
		}
	}
	run(t, KindLock, []scenario{
		{name: "lockactor listeners only: a plain release, and the plain yield", counts: true, steps: after(3, 3,
			publish(ch, "0"),
			callAfter(yieldWindow, "lock p1", reply(granted)),
			answered("p1", "granted"),
		)},
		{name: "an unknown count: others may listen, none known to be foreign", counts: true, steps: after(-1, 0,
			publish(ch, "0"),
			callAfter(yieldWindow, "lock p1", reply(granted)),
			answered("p1", "granted"),
		)},
		{name: "a foreign listener: the release is noted, and the queue holds back foreignWindow after a noted message", counts: true, steps: after(3, 2,
			publishNoted(ch, "1000"),
			callAfter(foreignWindow, "lock p1", reply(granted)),
			answered("p1", "granted"),
		)},
		{name: "a release without a note ends the long yield: the queue tries at once", counts: true, steps: after(3, 2,
			publishNoted(ch, "1000"),
			noCall(5*ms),
			publish(ch, "0"), // the foreign waiter's
			expectNow("lock p1", reply(granted)),
			answered("p1", "granted"),
		)},
		{name: "two foreign waiters: the long yield lasts until both have released", counts: true, steps: after(4, 2,
			publishNoted(ch, "1000"),
			noCall(3*ms),
			publish(ch, "0"), // the first foreign waiter's
			noCall(3*ms),
			publish(ch, "0"), // the second's
			expectNow("lock p1", reply(granted)),
			answered("p1", "granted"),
		)},
		{name: "noted messages during a long yield keep its end", counts: true, steps: after(3, 2,
			publishNoted(ch, "1000"),
			noCall(5*ms),
			publishNoted(ch, "1000"),
			callAfter(foreignWindow-5*ms, "lock p1", reply(granted)),
			answered("p1", "granted"),
		)},
		{name: "a count that cannot tell (replicas) is not asked again at the next yields", counts: true, steps: append(append(queued,
			publish(ch, "0"),
			expectNow("subscribers", foreignCount(-1, 0)),
			callAfter(yieldWindow, "lock w", reply(granted)),
		), append(handOn("unlock w"),
			noCall(time.Second),
			publish(ch, "0"), // no count at this yield
			callAfter(yieldWindow, "lock v", reply(granted)),
			answered("v", "granted"),
		)...)},
		{name: "a refusal in place of a long yield is no yield: the next noted release starts one", counts: true, steps: after(3, 2,
			publishNoted(ch, "1000"),
			tryLock("q", "q", 0),
			expectNow("lock q", reply(refused(10*time.Second))), // the verdict is now the refusal's
			answered("q", "refused"),
			noCall(5*ms),
			publishNoted(ch, "1000"), // a release: not kept out by the refusal's 10s
			callAfter(foreignWindow, "lock p1", reply(granted)),
			answered("p1", "granted"),
		)},
		{name: "a count that finds a foreign waiter after a refusal took a yield's place keeps the refusal", counts: true, steps: append(queued,
			publish(ch, "0"),
			expectNow("subscribers", keep("c")), // the yield's count, answered late
			tryLock("q", "q", 0),
			expectNow("lock q", reply(refused(10*time.Second))), // the verdict is now the refusal's
			answered("q", "refused"),
			later("c", foreignCount(3, 1)),
			noCall(foreignWindow+ms), // no retry at the end of a long yield that never began
			unanswered("w"),
		)},
		{name: "a resubscription after a refusal took a yield's place tries at once", counts: true, steps: append(queued,
			publish(ch, "0"),
			expectNow("subscribers", subscriberCount(2)),
			tryLock("q", "q", 0),
			expectNow("lock q", reply(refused(10*time.Second))),
			answered("q", "refused"),
			channelEvent(ch, redisio.Subscribed), // a release may have gone unheard
			expectNow("lock w", reply(granted)),
			answered("w", "granted"),
		)},
		{name: "a resubscription during a yield keeps it", counts: true, steps: append(queued,
			publish(ch, "0"),
			expectNow("subscribers", subscriberCount(2)), // a yield asks who listens
			noCall(ms),
			channelEvent(ch, redisio.Subscribed),
			callAfter(yieldWindow-ms, "lock w", reply(granted)),
			answered("w", "granted"),
		)},
		{name: "a note brings another Client's finding: a long yield, and our releases are noted for as long as it lasts", counts: true, steps: append(append(queued,
			publishNoted(ch, "300"),
			expectNow("subscribers", subscriberCount(2)), // none foreign: the note's finding stands
			callAfter(foreignWindow, "lock w", reply(granted)),
		), append(handOn("unlock_noted w"),
			noCall(300*ms-foreignWindow),
			publish(ch, "0"), // the finding has lapsed: a plain yield
			expectNow("subscribers", subscriberCount(2)),
			callAfter(yieldWindow, "lock v", reply(granted)),
			answered("v", "granted"),
		)...)},
		{name: "a count that finds a known foreign waiter again leaves the run to its bound", counts: true, steps: append(after(3, 2,
			publishNoted(ch, "1000"),
			callAfter(foreignWindow, "lock p1", reply(granted)),
			answered("p1", "granted"),
			func(h *harness) { delete(h.acq, "p0") },
			lock("p0", "p0", 0),
		), append(relays(1, HandoffRun, foreignCount(3, 2)), // the 33rd is relayed too
			unlock("end", "p1"),
			expect("unlock_noted p1", reply(released)),
			answered("end", "gone"),
		)...)},
		{name: "the finding lasts foreignMemory", counts: true, steps: append(after(3, 2,
			publishNoted(ch, "1000"),
			callAfter(foreignWindow, "lock p1", reply(granted)),
			answered("p1", "granted"),
			noCall(foreignMemory-foreignWindow),
		), []step{
			unlock("up1", "p1"),
			expect("unlock p1", reply(released)),
			answered("up1", "gone"),
			lock("p1b", "p1", 0),
			expect("lock p1", reply(refused(10*time.Second))),
			publish(ch, "0"),
			expectNow("subscribers", subscriberCount(3)), // a yield counts again
			callAfter(yieldWindow, "lock p1", reply(granted)),
			answered("p1b", "granted"),
		}...)},
		{name: "a release without a note renews the finding", counts: true, steps: append(after(3, 2,
			publishNoted(ch, "1000"),
			noCall(foreignWindow/2),
			publish(ch, "0"), // the foreign waiter's, at +10ms
			expectNow("lock p1", reply(refused(10*time.Second))),
			noCall(foreignMemory-5*ms), // 1s and 5ms after the count
		), []step{
			publishNoted(ch, "0"),
			expectNow("subscribers", subscriberCount(3)),        // finds none: the finding stands
			callAfter(foreignWindow, "lock p1", reply(granted)), // still long
			answered("p1", "granted"),
		}...)},
		{name: "another Client's noted release while our attempt is on its way: the run ends at its first release", counts: true, steps: append(after(3, 2,
			publishNoted(ch, "1000"),
			publish(ch, "0"), // the foreign waiter's
			expectNow("lock p1", keep("a")),
			publishNoted(ch, "1000"), // another Client's run ended first
			later("a", reply(granted)),
			answered("p1", "granted"),
			lock("p2", "p2", 0),
		), []step{
			unlock("up1", "p1"),
			expect("unlock_noted p1", reply(released)), // not relayed to p2
			answered("up1", "gone"),
		}...)},
		{name: "after foreignUnused long yields that nobody took, plain yields for foreignQuiet", counts: true, steps: append(append(append(after(3, 2,
			publishNoted(ch, "1000"),
			callAfter(foreignWindow, "lock p1", reply(granted)), // 1
			answered("p1", "granted"),
		), again("p1b")...), append(
			[]step{callAfter(foreignWindow, "lock p1", reply(granted)), answered("p1b", "granted")}, // 2
			again("p1c")...)...), append(
			[]step{callAfter(foreignWindow, "lock p1", reply(granted)), answered("p1c", "granted")}, // 3
			append(again("p1d"),
				expectNow("subscribers", subscriberCount(3)),
				callAfter(yieldWindow, "lock p1", reply(granted)), // quiet now
				answered("p1d", "granted"),
			)...)...)},
	})
}
