package actors

import (
	"testing"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// TestCountDownActor covers the latch actor (countdown.go): Await callers
// are released by a zero message heard after their barrier passed, by a
// read of the count that finds none (sent after they arrived: on arrival,
// on every (re)subscription or disconnection, after any message that
// cannot release them), or by a CountDown of this actor that leaves none;
// never by anything that predates them.
func TestCountDownActor(t *testing.T) {
	channel := redisio.CountDownChannel("x")
	run(t, KindCountDown, []scenario{
		{name: "awaiters wait while a count is set and are released by the zero message", steps: []step{
			await("w1"),
			expect("cdl_get", count(2)),
			await("w2"),
			expect("cdl_get", count(2)),
			listening(channel, true),
			barrierPasses(channel), // w1's
			barrierPasses(channel), // w2's, sent once w1's had passed
			unanswered("w1"),
			unanswered("w2"),
			publish(channel, "0"),
			answered("w1", "granted"),
			answered("w2", "granted"),
		}},
		{name: "a zero message heard before the awaiter's barrier passed only calls for a check", steps: []step{
			await("w"),
			expect("cdl_get", count(1)),
			listening(channel, true),
			publish(channel, "0"), // may be an old round's
			expect("cdl_get", count(1)),
			unanswered("w"),
			barrierPasses(channel),
			publish(channel, "0"),
			answered("w", "granted"),
		}},
		{name: "an old round's zero message, late on the connection, does not release an awaiter of the new count", steps: []step{
			await("w1"),
			expect("cdl_get", count(1)),
			listening(channel, true),
			barrierPasses(channel),
			// The round ends (a read after a resubscription finds no
			// count) and is set again; its zero message is still on its
			// way.
			channelEvent(channel, redisio.Subscribed),
			expect("cdl_get", count(0)),
			answered("w1", "granted"),
			await("w2"),
			expect("cdl_get", count(1)),
			publish(channel, "0"), // the old round's
			expect("cdl_get", count(1)),
			unanswered("w2"),
			noCall(30 * ms),
		}},
		{name: "a resubscription while a barrier is out sends another", steps: []step{
			await("w"),
			expect("cdl_get", count(1)),
			listening(channel, true),
			channelEvent(channel, redisio.Disconnected), // the barrier's PONG is lost with its connection
			expect("cdl_get", count(1)),
			barrierPasses(channel), // the new one (the fake keeps the old one too)
			barrierPasses(channel),
			publish(channel, "0"),
			answered("w", "granted"),
		}},
		{name: "an awaiter with no count set is released by its first read", steps: []step{
			await("w"),
			expect("cdl_get", count(0)),
			answered("w", "granted"),
		}},
		{name: "a resubscription re-reads the count: a zero message missed meanwhile is not lost", steps: []step{
			await("w"),
			expect("cdl_get", count(1)),
			listening(channel, true),
			channelEvent(channel, redisio.Subscribed),
			expect("cdl_get", count(1)),
			unanswered("w"),
			channelEvent(channel, redisio.Subscribed),
			expect("cdl_get", count(0)), // the count reached 0 while unsubscribed
			answered("w", "granted"),
		}},
		{name: "a disconnection re-reads the count", steps: []step{
			await("w"),
			expect("cdl_get", count(1)),
			listening(channel, true),
			channelEvent(channel, redisio.Disconnected),
			expect("cdl_get", count(0)),
			answered("w", "granted"),
		}},
		{name: "a new-count message re-reads rather than releases", steps: []step{
			await("w"),
			expect("cdl_get", count(3)),
			publish(channel, "1"),
			expect("cdl_get", count(3)),
			unanswered("w"),
		}},
		{name: "a failed read answers the awaiters it covered with its error", steps: []step{
			await("w"),
			expect("cdl_get", countErr(errBusy)),
			answered("w", failed(errBusy)),
		}},
		{name: "TrySetCount sets once", steps: []step{
			adjustMsg("s1", 2, true),
			expect("cdl_set 2", reply(released)), // 1: set
			answered("s1", "set"),
			adjustMsg("s2", 5, true),
			expect("cdl_set 5", reply(semNo)),
			answered("s2", "ok"),
		}},
		{name: "a CountDown refused by Redis is answered with its error and releases nobody", steps: []step{
			await("w"),
			expect("cdl_get", count(1)),
			adjustMsg("d", -1, false),
			expect("cdl_down", fail(errBusy)),
			answered("d", failed(errBusy)),
			unanswered("w"),
			noCall(30 * ms),
		}},
		{name: "a CountDown that leaves a count releases nobody", steps: []step{
			await("w"),
			expect("cdl_get", count(2)),
			adjustMsg("d", -1, false),
			expect("cdl_down", reply(redisio.Reply{Val: int64(1)})),
			answered("d", "ok"),
			unanswered("w"),
		}},
		{name: "a CountDown that reaches 0 releases the awaiters queued before it, not after", steps: []step{
			await("w1"),
			expect("cdl_get", count(1)),
			adjustMsg("d", -1, false),
			expect("cdl_down", keep("down")),
			await("w2"), // arrives while the CountDown is in flight
			later("down", reply(redisio.Reply{Val: int64(0)})),
			answered("d", "ok"),
			answered("w1", "granted"),
			unanswered("w2"),
			expect("cdl_get", count(1)), // set again meanwhile: w2 waits
			unanswered("w2"),
		}},
		{name: "a CountDown whose reply was lost: settled as run, it releases the awaiters", steps: []step{
			await("w"),
			expect("cdl_get", count(1)),
			adjustMsg("d", -1, false),
			expect("cdl_down", lose(true, redisio.Reply{Val: int64(0)})),
			expect("resolve cdl_down", settle(redisio.Ran, redisio.Reply{Val: int64(0)})),
			answered("d", "ok"),
			answered("w", "granted"),
		}},
		{name: "a CountDown that did not run is not sent again: the caller is told", steps: []step{
			adjustMsg("d", -1, false),
			expect("cdl_down", lose(false, redisio.Reply{Val: int64(0)})),
			expect("resolve cdl_down", settle(redisio.NotRun, redisio.Reply{})),
			answered("d", failed(errNotApplied)),
			noCall(30 * ms),
		}},
	})
}

// await is an Await call.
func await(label string) step {
	return func(h *harness) {
		req := messages.NewRequest()
		h.acq[label] = req
		h.send(&messages.Acquire{Req: req})
	}
}

// adjustMsg is a TrySetCount(n) (set) or a CountDown (n -1).
func adjustMsg(label string, n int, set bool) step {
	return func(h *harness) {
		m := &messages.Adjust{N: n, SetOnly: set, Reply: make(chan messages.AdjustResult, 1)}
		h.adj[label] = m
		h.send(m)
	}
}

// count answers a read of the count: n (0: none set).
func count(n int64) act { return func(_ *harness, c *call) { c.count(n, nil) } }

// countErr: the read of the count failed.
func countErr(err error) act { return func(_ *harness, c *call) { c.count(0, err) } }

// barrierPasses waits for a barrier on channel and lets it pass.
func barrierPasses(channel string) step {
	return func(h *harness) {
		h.poll(waitFor, func() bool { return h.ps.pong(channel) }, "no barrier on %s", channel)
	}
}

// channelEvent delivers a (re)subscription or a disconnection on channel.
func channelEvent(channel string, kind redisio.EventKind) step {
	return func(h *harness) {
		if !h.ps.publish(channel, redisio.Event{Kind: kind}) {
			h.t.Fatalf("nobody listens on %s", channel)
		}
	}
}
