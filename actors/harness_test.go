package actors

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// A scenario is one table row of the state machines' unit tests: callers'
// messages, the calls the actor must send in that order with the replies
// the fake gives them, and the answers the callers must get. Time only
// moves for real, and only where a row says late(d); every decision that
// depends on it is steered by leases and latch lives far from the
// threshold, so a row is deterministic and takes milliseconds.
type scenario struct {
	name      string
	latchKeep time.Duration // Config.LatchKeep; 0: an hour
	fairWait  time.Duration // Config.FairWait; 0: the default
	permits   int           // the semaphore's count in Redis at the start
	spinQuiet bool          // Config.SpinQuiet: a spin lock's releases publish nothing
	steps     []step
}

// step is one thing a scenario does or checks.
type step func(h *harness)

// act is what the test does with a call the actor made.
type act func(h *harness, c *call)

// harness runs one scenario against one actor of a runtime on the fakes.
type harness struct {
	t     *testing.T
	rt    *Runtime
	st    *fakeStore
	ps    *fakeChannels
	key   Key
	acq   map[string]*messages.Request
	rel   map[string]*messages.Release
	ext   map[string]*messages.Extend
	adj   map[string]*messages.Adjust
	kept  map[string]*call
	heard map[string]string // answers already read, by caller label
}

// waitFor bounds every wait for something the actor must do at once.
const waitFor = 2 * time.Second

const ms = time.Millisecond

func run(t *testing.T, kind Kind, rows []scenario) {
	t.Helper()
	for _, sc := range rows {
		t.Run(sc.name, func(t *testing.T) {
			h := newHarness(t, kind, sc)
			for _, s := range sc.steps {
				s(h)
				if t.Failed() {
					break
				}
			}
			h.noMoreCalls()
			h.rt.Close()
		})
	}
}

func newHarness(t *testing.T, kind Kind, sc scenario) *harness {
	keep := sc.latchKeep
	if keep == 0 {
		keep = time.Hour
	}
	st, ps := newFakeStore(), newFakeChannels()
	st.permits = sc.permits
	rt := newRuntimeOn(Config{
		ClientID:         "client",
		Watchdog:         time.Hour,
		IdleAfter:        time.Hour,
		SemaphoreRecheck: time.Hour,
		FairWait:         sc.fairWait,
		LatchKeep:        keep,
		SpinQuiet:        sc.spinQuiet,
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, st, ps)
	return &harness{
		t: t, rt: rt, st: st, ps: ps, key: Key{Kind: kind, Name: "x"},
		acq: map[string]*messages.Request{}, rel: map[string]*messages.Release{},
		ext: map[string]*messages.Extend{}, adj: map[string]*messages.Adjust{}, kept: map[string]*call{}, heard: map[string]string{},
	}
}

func (h *harness) send(msg any) {
	if err := h.rt.Send(h.key, msg); err != nil {
		h.t.Fatalf("send: %v", err)
	}
}

// noMoreCalls fails if the actor made a call the scenario did not expect.
func (h *harness) noMoreCalls() {
	var extra []string
	for len(h.st.calls) > 0 {
		extra = append(extra, (<-h.st.calls).what)
	}
	if len(extra) > 0 {
		h.t.Errorf("calls the scenario did not expect: %v", extra)
	}
}

// Callers. A label names one call (its answer); owners are "c:<owner>".

func acquireMsg(label, own string, lease time.Duration, try bool) step {
	return func(h *harness) {
		req := messages.NewRequest()
		h.acq[label] = req
		h.send(&messages.Acquire{Owner: "c:" + own, Lease: lease, TryOnly: try, Req: req})
	}
}

// lock is a Lock call of own with lease (0: the watchdog's).
func lock(label, own string, lease time.Duration) step { return acquireMsg(label, own, lease, false) }

// tryLock is a TryLock call of own with lease.
func tryLock(label, own string, lease time.Duration) step { return acquireMsg(label, own, lease, true) }

// unlock is an Unlock call of own.
func unlock(label, own string) step {
	return func(h *harness) {
		m := &messages.Release{Owner: "c:" + own, Reply: make(chan messages.ReleaseResult, 1)}
		h.rel[label] = m
		h.send(m)
	}
}

// acquireN and tryAcquireN ask a semaphore for n permits.
func acquireN(label string, n int) step    { return permitsMsg(label, n, false) }
func tryAcquireN(label string, n int) step { return permitsMsg(label, n, true) }

func permitsMsg(label string, n int, try bool) step {
	return func(h *harness) {
		req := messages.NewRequest()
		h.acq[label] = req
		h.send(&messages.Acquire{Permits: n, TryOnly: try, Req: req})
	}
}

// releaseN gives n permits back.
func releaseN(label string, n int) step {
	return func(h *harness) {
		m := &messages.Release{Permits: n, Reply: make(chan messages.ReleaseResult, 1)}
		h.rel[label] = m
		h.send(m)
	}
}

// abandon withdraws label's acquire, as a caller whose ctx ended does.
func abandon(label, own string) step {
	return func(h *harness) {
		req := h.acq[label]
		if !req.Abandon() {
			h.t.Fatalf("%s: already answered", label)
		}
		h.send(&messages.Abandon{Owner: "c:" + own, Req: req})
	}
}

// extend re-applies lease to own's hold, as a RedLock coordinator does: the
// way a row gives a granted hold a lease too short to grant it with.
func extend(label, own string, lease time.Duration) step {
	return func(h *harness) {
		m := &messages.Extend{Owner: "c:" + own, Lease: lease, Reply: make(chan messages.ExtendResult, 1)}
		h.ext[label] = m
		h.send(m)
	}
}

// handleExtend is a handle's own Extend (Lock.Extend) of own's hold.
func handleExtend(label, own string, lease time.Duration) step {
	return func(h *harness) {
		m := &messages.Extend{Owner: "c:" + own, Lease: lease, Handle: true, Reply: make(chan messages.ExtendResult, 1)}
		h.ext[label] = m
		h.send(m)
	}
}

// Redis.

// expect waits for the actor's next call, checks it is what, and does acts
// with it in order.
func expect(what string, acts ...act) step {
	return func(h *harness) {
		select {
		case c := <-h.st.calls:
			if c.what != what {
				h.t.Fatalf("call %q, want %q (answers so far: %v)", c.what, what, h.heard)
			}
			for _, a := range acts {
				a(h, c)
			}
		case <-time.After(waitFor):
			h.t.Fatalf("no call within %v, want %q (answers so far: %v)", waitFor, what, h.heard)
		}
	}
}

// noCall checks that the actor makes no call for d.
func noCall(d time.Duration) step {
	return func(h *harness) {
		select {
		case c := <-h.st.calls:
			h.t.Fatalf("call %q, want none for %v", c.what, d)
		case <-time.After(d):
		}
	}
}

// reply: the request ran and r comes back.
func reply(r redisio.Reply) act {
	return func(h *harness, c *call) {
		if !r.Failed() {
			h.st.ranNow(c, r)
		}
		c.then(r)
	}
}

// fail: Redis answered with an error: the request did not run.
func fail(err serverError) act {
	return func(_ *harness, c *call) { c.then(redisio.Reply{Err: err}) }
}

// lose: the reply is lost (an error that means "may have run"); ran says
// whether the request ran, which is what a settlement finds.
func lose(ran bool, r redisio.Reply) act {
	return func(h *harness, c *call) {
		if ran {
			h.st.ranNow(c, r)
		}
		c.then(redisio.Reply{Err: errLost})
	}
}

// late: what follows comes back d later.
func late(d time.Duration) act { return func(*harness, *call) { time.Sleep(d) } }

// keep holds the call back; later answers it.
func keep(label string) act { return func(h *harness, c *call) { h.kept[label] = c } }

func later(label string, acts ...act) step {
	return func(h *harness) {
		for _, a := range acts {
			a(h, h.kept[label])
		}
	}
}

// settle answers a settlement with s; Ran replays the reply the request
// gave (the fake's record of it: r).
func settle(s redisio.Settlement, r redisio.Reply) act {
	return func(h *harness, c *call) {
		if c.settled == nil {
			h.t.Fatalf("%q is not a settlement", c.what)
		}
		if s == redisio.Ran && (c.of == nil || !c.of.ran) {
			h.t.Fatalf("%q: the scenario settles Ran a request that did not run", c.what)
		}
		c.settled(s, r, nil)
	}
}

// settleErr: the settlement itself got no answer.
func settleErr(err error) act {
	return func(_ *harness, c *call) { c.settled(redisio.NotRun, redisio.Reply{}, err) }
}

// subscriberCount answers a subscriber count with n.
func subscriberCount(n int64) act { return func(_ *harness, c *call) { c.count(n, nil) } }

// staleNow checks what a renewal's stale reports now: true once its hold
// was released, so that redisio drops it if it has not left yet.
func staleNow(want bool) act {
	return func(h *harness, c *call) {
		if got := c.stale != nil && c.stale(); got != want {
			h.t.Errorf("%s: stale reports %v, want %v", c.what, got, want)
		}
	}
}

// watchdogTick runs the watchdog now.
func watchdogTick() step { return func(h *harness) { h.send(&messages.RenewTick{}) } }

// notSentStale: redisio dropped the renewal as stale before it left.
func notSentStale() act {
	return func(_ *harness, c *call) { c.flag(false, redisio.ErrStale) }
}

// done answers a renewal or a cancel.
func done(ok bool) act { return func(_ *harness, c *call) { c.flag(ok, nil) } }

// publish delivers a message on channel (waiting until the actor listens).
func publish(channel, payload string) step {
	return func(h *harness) {
		h.poll(waitFor, func() bool {
			return h.ps.publish(channel, redisio.Event{Kind: redisio.Message, Payload: payload})
		}, "nobody listens on %s", channel)
	}
}

// poll tries done every millisecond until it succeeds, failing the test
// with the message format, args once within has passed.
func (h *harness) poll(within time.Duration, done func() bool, format string, args ...any) {
	h.t.Helper()
	deadline := time.Now().Add(within)
	for !done() {
		if time.Now().After(deadline) {
			h.t.Fatalf(format, args...)
		}
		time.Sleep(ms)
	}
}

// Checks.

// answered waits for label's answer and checks it reads want (see
// describe).
func answered(label, want string) step {
	return func(h *harness) {
		got, ok := h.answer(label, waitFor)
		switch {
		case !ok:
			h.t.Fatalf("%s: no answer within %v, want %q", label, waitFor, want)
		case got != want:
			h.t.Fatalf("%s answered %q, want %q", label, got, want)
		}
	}
}

// unanswered checks that label has had no answer yet.
func unanswered(label string) step {
	return func(h *harness) {
		if got, ok := h.answer(label, 0); ok {
			h.t.Fatalf("%s answered %q, want no answer yet", label, got)
		}
	}
}

// permits checks the semaphore's count in Redis.
func permits(n int) step {
	return func(h *harness) {
		if got := h.st.count(); got != n {
			h.t.Fatalf("the semaphore counts %d permits in Redis, want %d", got, n)
		}
	}
}

// listening checks whether the actor is subscribed to channel. The actor
// (un)subscribes as it settles, which can come just after the answer a
// step before waited for: it gets a second to get there.
func listening(channel string, want bool) step {
	return func(h *harness) {
		h.poll(time.Second, func() bool { return h.ps.listening(channel) == want }, "subscribed to %s: %v, want %v", channel, !want, want)
	}
}

func (h *harness) answer(label string, wait time.Duration) (string, bool) {
	if s, ok := h.heard[label]; ok {
		return s, true
	}
	var s string
	switch {
	case h.acq[label] != nil:
		if _, ok := recv(h.acq[label].Done(), wait); !ok {
			return "", false
		}
		r := h.acq[label].Result()
		s = describe(r.Granted, false, false, r.Err, "refused")
	case h.rel[label] != nil:
		r, ok := recv(h.rel[label].Reply, wait)
		if !ok {
			return "", false
		}
		s = describe(false, r.Gone, r.NotHeld, r.Err, "ok")
	case h.ext[label] != nil:
		r, ok := recv(h.ext[label].Reply, wait)
		if !ok {
			return "", false
		}
		s = describe(r.OK, false, false, r.Err, "refused")
		if r.Watchdog {
			s = "watchdog"
		}
	case h.adj[label] != nil:
		r, ok := recv(h.adj[label].Reply, wait)
		if !ok {
			return "", false
		}
		s = describe(false, false, false, r.Err, "ok") // a CountDown, or a TrySetCount that set nothing
		if r.Err == nil && r.Set {
			s = "set"
		}
	default:
		h.t.Fatalf("no caller %q", label)
	}
	h.heard[label] = s
	return s, true
}

// recv takes a value from ch, waiting up to wait (0: only if one is there).
func recv[T any](ch <-chan T, wait time.Duration) (v T, ok bool) {
	if wait == 0 {
		select {
		case v = <-ch:
			return v, true
		default:
			return v, false
		}
	}
	select {
	case v = <-ch:
		return v, true
	case <-time.After(wait):
		return v, false
	}
}

// describe reads an answer as the rows write it: "granted", "gone",
// "notheld", "err: <message>", or otherwise: "refused" (an acquire) or
// "ok" (a release that left holds, permits given back).
func describe(granted, gone, notHeld bool, err error, otherwise string) string {
	switch {
	case err != nil:
		return "err: " + err.Error()
	case granted:
		return "granted"
	case gone:
		return "gone"
	case notHeld:
		return "notheld"
	}
	return otherwise
}

// failed is how an answer carrying err reads.
func failed(err error) string { return "err: " + err.Error() }

// fairChannel is the fair-lock channel of own on the rows' lock.
func fairChannel(own string) string { return redisio.FairChannel("x", "c:"+own) }
