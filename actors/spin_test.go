package actors

import (
	"strconv"
	"testing"
	"time"

	"github.com/lockactor/lockactor/redisio"
)

// TestSpinnerSteps: each wait lies in [d/2, d] for the backoff's step d,
// which doubles from lo up to hi; reset starts over; a local hold or a
// shorter remaining lease wins; a nil spinner (Lock) waits out the lease.
func TestSpinnerSteps(t *testing.T) {
	const ms = time.Millisecond
	s := newSpinner(2*ms, 16*ms)
	for round := range 2 {
		for _, d := range []time.Duration{2 * ms, 4 * ms, 8 * ms, 16 * ms, 16 * ms} {
			if got := s.retryIn(time.Minute, 0); got < d/2 || got > d {
				t.Fatalf("round %d: wait %v, want within [%v, %v]", round, got, d/2, d)
			}
		}
		s.reset()
	}
	tests := []struct {
		name string
		s    *spinner
		ttl  time.Duration
		ours time.Duration // how long our holds can last; 0: none held
		want time.Duration
	}{
		{"the lease ends first", newSpinner(10*ms, 10*ms), 3 * ms, 0, 3 * ms},
		{"a local owner holds", newSpinner(ms, 10*ms), time.Minute, time.Hour, time.Minute},
		{"Lock waits out the lease", nil, time.Minute, 0, time.Minute},
	}
	for _, tc := range tests {
		if got := tc.s.retryIn(tc.ttl, tc.ours); got != tc.want {
			t.Errorf("%s: retryIn = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := (*spinner)(nil).pause(); got != 0 {
		t.Errorf("Lock's pause after a run = %v, want 0", got)
	}
	if got := newSpinner(ms, 10*ms).pause(); got != 10*ms {
		t.Errorf("pause after a run = %v, want the cap", got)
	}
}

// TestSpinJitterSpreads: waits drawn at one step are not all the same, so
// waiters refused together do not retry in step.
func TestSpinJitterSpreads(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 50 {
		s := newSpinner(100*time.Millisecond, 100*time.Millisecond)
		seen[s.next()] = true
	}
	if len(seen) < 10 {
		t.Fatalf("50 first waits took %d distinct values", len(seen))
	}
}

// TestSpinActor_RefusedWhileHeld: a refusal while a local owner holds
// makes the queue wait for that owner's release or loss, but no longer than
// its hold can last: the refusal's TTL may be another owner's (ours was
// force-unlocked, which a spin lock does not hear).
func TestSpinActor_RefusedWhileHeld(t *testing.T) {
	run(t, KindSpin, []scenario{
		{name: "a TTL longer than our hold's lease: the queue tries when our lease ends", steps: []step{
			lock("h", "h", 500*ms),
			expect("lock h", reply(granted)),
			answered("h", "granted"),
			lock("w", "w", long), // waits for h
			tryLock("t", "t", long),
			expect("lock t", reply(refused(1900*ms))),
			answered("t", "refused"),
			callAfter(500*ms, "lock w", reply(granted)),
			answered("w", "granted"),
		}},
		{name: "our own hold's TTL: the queue waits for the release", steps: []step{
			lock("h", "h", 500*ms),
			expect("lock h", reply(granted)),
			lock("w", "w", long),
			tryLock("t", "t", long),
			expect("lock t", reply(refused(500*ms))),
			noCall(100 * ms),
			unlock("u", "h"),
			expect("handoff h>w", reply(handedOver)),
			answered("w", "granted"),
		}},
	})
}

// TestSpinActor_ReleasePublish covers what a release publishes. A spin
// lock publishes as Lock does unless its Client is quiet (WithSpinPublish
// (false)), and then sends unlock.lua with no publish command. A release
// whose publish the server refused (an ACL; unlock.lua replies 4) stands,
// for either kind: the caller hears it released, and the Client says once
// that nobody was told; a quiet lock asked for no message and says nothing.
func TestSpinActor_ReleasePublish(t *testing.T) {
	run(t, KindSpin, []scenario{
		{name: "publishing: a release that published", steps: holding(
			unlock("u", "h"),
			expect("unlock h", reply(released)),
			answered("u", "gone"),
		)},
		{name: "publishing: a refused publish does not fail the release", steps: holding(
			unlock("u", "h"),
			expect("unlock h", reply(releasedQuiet)),
			expect("untold"),
			answered("u", "gone"),
			lock("h2", "h", long), // the handle holds again: nothing was left behind
			expect("lock h", reply(granted)),
			answered("h2", "granted"),
		)},
		{name: "quiet: the release asks for no publish", spinQuiet: true, steps: holding(
			unlock("u", "h"),
			expect("unlock_quiet h", reply(releasedQuiet)),
			answered("u", "gone"),
			noCall(20*ms), // no "untold": nothing was asked
		)},
		// Random seed 1795892117002985525 at e3d51e8: another Client's
		// ForceUnlock deleted a spin hold; two relays later, the third
		// owner held a ghost. A spin lock hears no force unlock: a
		// watchdog hold, confirmed a moment ago, still hands off through
		// Redis.
		{name: "a watchdog hold hands off through Redis: a spin lock never relays", steps: []step{
			lock("h", "h", 0),
			expect("lock h", reply(granted)),
			answered("h", "granted"),
			lock("w", "w", 0),
			noCall(5 * ms),
			unlock("u", "h"),
			expect("handoff h>w", reply(handedOver)),
			answered("u", "gone"),
			answered("w", "granted"),
		}},
		{name: "quiet: a hand-off is the same script", spinQuiet: true, steps: holding(
			lock("w", "w", long),
			noCall(5*ms),
			unlock("u", "h"),
			expect("handoff h>w", reply(handedOver)),
			answered("u", "gone"),
			answered("w", "granted"),
			unlock("v", "w"),
			expect("unlock_quiet w", reply(releasedQuiet)),
			answered("v", "gone"),
		)},
	})
	run(t, KindLock, []scenario{
		{name: "Lock: a refused publish does not fail the release", spinQuiet: true, steps: holding(
			unlock("u", "h"),
			expect("unlock h", reply(releasedQuiet)), // SpinQuiet is not Lock's
			expect("untold"),
			answered("u", "gone"),
		)},
	})
}

// TestLockActor_RefusedPublishEndsRun: a run of hand-offs ends, with other
// connections listening, in a plain release whose own message wakes the
// local waiters. When the server refused that message, no echo comes:
// the local waiters try at once instead of waiting out the holder's lease.
func TestLockActor_RefusedPublishEndsRun(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply redisio.Reply
		after step
	}{
		{"published: the waiter waits for the message", released, noCall(50 * ms)},
		{"refused: the waiter tries at once", releasedQuiet, func(h *harness) {
			expect("untold")(h)
			expect("lock b", reply(granted))(h)
			answered("b"+strconv.Itoa(HandoffRun), "granted")(h)
		}},
	} {
		steps := []step{
			lock("a0", "a", long),
			expect("lock a", reply(granted)),
			answered("a0", "granted"),
		}
		// a and b take turns, each queued while the other holds, and
		// each release hands the lock over in its script.
		own := [2]string{"a", "b"}
		for i := range HandoffRun {
			from, to := own[i%2], own[(i+1)%2]
			next := to + strconv.Itoa(i+1)
			steps = append(steps, lock(next, to, long))
			if i == 0 {
				steps = append(steps, noCall(5*ms))
			}
			steps = append(steps,
				unlock("u"+strconv.Itoa(i), from),
				expect("handoff "+from+">"+to, reply(handedOver)))
			if i+1 == HandoffRun/2 {
				steps = append(steps, expect("subscribers", subscriberCount(5))) // others listen
			}
			steps = append(steps, answered("u"+strconv.Itoa(i), "gone"), answered(next, "granted"))
		}
		// HandoffRun hand-offs: the next release is a plain one.
		last, waiter := own[HandoffRun%2], own[(HandoffRun+1)%2]
		steps = append(steps,
			lock(waiter+strconv.Itoa(HandoffRun), waiter, long),
			unlock("end", last),
			expect("unlock "+last, reply(tc.reply)),
			answered("end", "gone"),
			tc.after)
		run(t, KindLock, []scenario{{name: tc.name, counts: true, steps: steps}})
	}
}
