package actors

import (
	"strings"
	"testing"
	"time"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// TestPermitActor covers the semaphore actor in permit mode (KindPermit,
// permit.go): one permit per request under the request's id, refusals that
// name the earliest lease, releases by id. The fake counts the permits in
// Redis as the calls that ran left them, and names each call by its permit
// ("permit_acquire a" is the id aaaa...): a request sent again must name
// the same permit.
func TestPermitActor(t *testing.T) {
	channel := redisio.SemaphoreChannel("x")
	run(t, KindPermit, []scenario{
		{name: "granted", permits: 1, steps: []step{
			acquirePermit("a", 'a', false),
			expect("permit_acquire a", reply(permOK)),
			answered("a", "granted"),
			permits(0),
		}},
		{name: "a TryAcquire refused is answered at once and not tried again", steps: []step{
			acquirePermit("a", 'a', true),
			expect("permit_acquire a", reply(permNo(50*ms))),
			answered("a", "refused"),
			noCall(150 * ms), // past the earliest lease the refusal named
		}},
		{name: "refused, then woken by a message that counts a permit", steps: []step{
			acquirePermit("a", 'a', false),
			expect("permit_acquire a", reply(permNo(time.Hour))),
			unanswered("a"),
			listening(channel, true),
			publish(channel, "0"), // a count of 0 cannot serve it
			noCall(20 * ms),
			publish(channel, "1"),
			expect("permit_acquire a", reply(permOK)),
			answered("a", "granted"),
		}},
		{name: "refused, then tried again when the earliest lease ends, with no message", steps: []step{
			acquirePermit("a", 'a', false),
			expect("permit_acquire a", reply(permNo(80*ms))),
			noCall(40 * ms), // not before the lease ends (the re-check is an hour)
			expect("permit_acquire a", reply(permOK)),
			answered("a", "granted"),
		}},
		{name: "refused with no permit out: no retry until a message", steps: []step{
			acquirePermit("a", 'a', false),
			expect("permit_acquire a", reply(permNone)),
			noCall(100 * ms),
			publish(channel, "1"),
			expect("permit_acquire a", reply(permOK)),
			answered("a", "granted"),
		}},
		{name: "a release of an id not held is answered not held", permits: 1, steps: []step{
			releasePermit("r", 'b'),
			expect("permit_release b", reply(notHeldReply)),
			answered("r", "notheld"),
			permits(1),
		}},
		{name: "a release wakes the head of this Client at once", steps: []step{
			acquirePermit("a", 'a', false),
			expect("permit_acquire a", reply(permNo(time.Hour))),
			releasePermit("r", 'b'),
			expect("permit_release b", reply(released)),
			answered("r", "ok"),
			expect("permit_acquire a", reply(permOK)),
			answered("a", "granted"),
			permits(0),
		}},
		{name: "an acquire whose reply was lost is granted from the record", permits: 1, steps: []step{
			acquirePermit("a", 'a', false),
			expect("permit_acquire a", lose(true, permOK)),
			expect("resolve permit_acquire a", settle(redisio.Ran, permOK)),
			answered("a", "granted"),
			permits(0),
			noCall(30 * ms),
		}},
		{name: "an acquire that did not run is sent again under the same id", permits: 1, steps: []step{
			acquirePermit("a", 'a', false),
			expect("permit_acquire a", lose(false, permOK)),
			expect("resolve permit_acquire a", settle(redisio.NotRun, redisio.Reply{})),
			expect("permit_acquire a", reply(permOK)),
			answered("a", "granted"),
			permits(0),
		}},
		{name: "a TryAcquire that did not run is sent again under the same id", permits: 1, steps: []step{
			acquirePermit("a", 'a', true),
			expect("permit_acquire a", lose(false, permOK)),
			expect("resolve permit_acquire a", settle(redisio.NotRun, redisio.Reply{})),
			expect("permit_acquire a", reply(permOK)),
			answered("a", "granted"),
			permits(0),
		}},
		{name: "a permit granted to a caller gone is given back under its id", permits: 1, steps: []step{
			acquirePermit("a", 'a', false),
			expect("permit_acquire a", keep("acq")),
			abandon("a", ""),
			later("acq", reply(permOK)),
			expect("permit_release a", reply(released)),
			permits(1),
		}},
		{name: "a permit granted with some of its lease left is the caller's", permits: 1, steps: []step{
			acquirePermitFor("a", 'a', false, 60*ms),
			expect("permit_acquire a", late(25*ms), reply(permOK)),
			answered("a", "granted"),
			permits(0),
		}},
		{name: "a permit granted past its lease is given back, and the request tries again", permits: 1, steps: []step{
			acquirePermitFor("a", 'a', false, 20*ms),
			expect("permit_acquire a", late(25*ms), reply(permOK)),
			expect("permit_release a", reply(released)),
			unanswered("a"),
			expect("permit_acquire a", reply(permOK)),
			answered("a", "granted"),
			permits(0),
		}},
		{name: "a TryAcquire granted past its lease is given back and reports none free", permits: 1, steps: []step{
			acquirePermitFor("a", 'a', true, 20*ms),
			expect("permit_acquire a", late(25*ms), reply(permOK)),
			answered("a", "refused"),
			expect("permit_release a", reply(released)),
			permits(1),
		}},
		{name: "a permit granted without the replicas is given back", permits: 1, steps: []step{
			acquirePermit("a", 'a', true),
			expect("permit_acquire a", reply(unsynced(permOK))),
			answered("a", failed(redisio.ErrNotReplicated)),
			expect("permit_release a", reply(released)),
			permits(1),
		}},
		{name: "a release whose reply was lost gives the permit back once", steps: []step{
			releasePermit("r", 'a'),
			expect("permit_release a", lose(true, released)),
			expect("resolve permit_release a", settle(redisio.Ran, released)),
			answered("r", "ok"),
			permits(1),
			noCall(30 * ms),
		}},
		{name: "a release that did not run is sent again", steps: []step{
			releasePermit("r", 'a'),
			expect("permit_release a", lose(false, released)),
			expect("resolve permit_release a", settle(redisio.NotRun, redisio.Reply{})),
			expect("permit_release a", reply(released)),
			answered("r", "ok"),
			permits(1),
		}},
	})
}

// permitID is a row's permit id: the hex digit c, 32 times.
func permitID(c byte) string { return strings.Repeat(string(c), 32) }

// acquirePermit asks for one permit under id c, for a minute (try: once).
func acquirePermit(label string, c byte, try bool) step {
	return acquirePermitFor(label, c, try, time.Minute)
}

// acquirePermitFor asks for one permit under id c, for lease.
func acquirePermitFor(label string, c byte, try bool, lease time.Duration) step {
	return func(h *harness) {
		req := messages.NewRequest()
		h.acq[label] = req
		h.send(&messages.Acquire{Owner: permitID(c), Permits: 1, Lease: lease, TryOnly: try, Req: req})
	}
}

// releasePermit gives back the permit with id c.
func releasePermit(label string, c byte) step {
	return func(h *harness) {
		m := &messages.Release{Owner: permitID(c), Reply: make(chan messages.ReleaseResult, 1)}
		h.rel[label] = m
		h.send(m)
	}
}

// permit_acquire.lua's replies, and permit_release.lua's "not held".
var (
	permOK       = redisio.Reply{Val: []any{int64(1), int64(0)}}
	permNone     = redisio.Reply{Val: []any{int64(0), int64(-1)}} // refused, no permit out
	notHeldReply = redisio.Reply{Val: int64(0)}
)

// permNo is a refusal whose earliest held permit's lease ends in next.
func permNo(next time.Duration) redisio.Reply {
	return redisio.Reply{Val: []any{int64(0), next.Milliseconds()}}
}
