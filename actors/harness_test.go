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
// the fake gives them, and the answers the callers must get. The actor
// runs on the test's goroutine under a virtual clock (virtual_test.go):
// after every step it handles every message queued, and time moves only
// where a row says so (late, noCall, at) or waits for what a timer brings
// (expect, answered), so a row is exact and takes microseconds.
type scenario struct {
	name      string
	latchKeep time.Duration // Config.LatchKeep; 0: an hour
	fairWait  time.Duration // Config.FairWait; 0: the default
	permits   int           // the semaphore's count in Redis at the start
	spinQuiet bool          // Config.SpinQuiet: a spin lock's releases publish nothing
	recheck   time.Duration // Config.SemaphoreRecheck; 0: an hour
	group     *groupShape   // a coordinator's rows (group_test.go); nil: one lock actor
	watchdog  time.Duration // Config.Watchdog; 0: an hour
	noRelay   bool          // Config.NoRelay
	// counts: the row answers subscriber counts itself (it expects each
	// "subscribers" call); otherwise each is answered at once, with two
	// lockactor Clients listening (others listen, none foreign).
	counts bool
	steps  []step
}

// step is one thing a scenario does or checks.
type step func(h *harness)

// act is what the test does with a call the actor made.
type act func(h *harness, c *call)

// harness runs one scenario against one actor of a runtime on the fakes.
type harness struct {
	t     *testing.T
	v     *virtual
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
	group *Group            // the coordinator's members, when the rows are a group's
}

// waitFor bounds, on the virtual clock, every wait for something a timer
// of the actor brings.
const waitFor = 2 * time.Second

const ms = time.Millisecond

func run(t *testing.T, kind Kind, rows []scenario) {
	t.Helper()
	for _, sc := range rows {
		t.Run(sc.name, func(t *testing.T) {
			h := newHarness(t, kind, sc)
			for _, s := range sc.steps {
				s(h)
				h.v.run()
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
	recheck := sc.recheck
	if recheck == 0 {
		recheck = time.Hour
	}
	watchdog := sc.watchdog
	if watchdog == 0 {
		watchdog = time.Hour
	}
	st, ps, v := newFakeStore(), newFakeChannels(), newVirtual()
	st.permits = sc.permits
	st.autoCount = !sc.counts
	rt := newRuntimeWith(Config{
		ClientID:         "client",
		Watchdog:         watchdog,
		NoRelay:          sc.noRelay,
		IdleAfter:        time.Hour,
		SemaphoreRecheck: recheck,
		FairWait:         sc.fairWait,
		LatchKeep:        keep,
		SpinQuiet:        sc.spinQuiet,
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, v, st, ps)
	h := &harness{
		t: t, v: v, rt: rt, st: st, ps: ps, key: Key{Kind: kind, Name: "x"},
		acq: map[string]*messages.Request{}, rel: map[string]*messages.Release{},
		ext: map[string]*messages.Extend{}, adj: map[string]*messages.Adjust{}, kept: map[string]*call{}, heard: map[string]string{},
	}
	if sc.group != nil {
		h.key, h.group = Key{Kind: KindGroup, Name: "g"}, sc.group.build(rt)
	}
	return h
}

func (h *harness) send(msg any) {
	var err error
	if h.group != nil {
		err = h.rt.SendGroup(h.key, *h.group, msg)
	} else {
		err = h.rt.Send(h.key, msg)
	}
	if err != nil {
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

// readLock and writeLock are Lock calls of own's read and write views of
// a ReadWriteLock (KindRW), with lease.
func readLock(label, own string, lease time.Duration) step {
	return modeMsg(label, own, messages.Read, lease)
}

func writeLock(label, own string, lease time.Duration) step {
	return modeMsg(label, own, messages.Write, lease)
}

func modeMsg(label, own string, mode messages.Mode, lease time.Duration) step {
	return func(h *harness) {
		req := messages.NewRequest()
		h.acq[label] = req
		h.send(&messages.Acquire{Owner: "c:" + own, Mode: mode, Lease: lease, Req: req})
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

// expect takes the actor's next call (advancing the clock timer by timer,
// up to waitFor, until it makes one), checks it is what, and does acts
// with it in order.
func expect(what string, acts ...act) step { return expectWithin(waitFor, what, acts...) }

// expectNow is expect for a call the actor has made by now, with no time
// passing.
func expectNow(what string, acts ...act) step { return expectWithin(0, what, acts...) }

func expectWithin(within time.Duration, what string, acts ...act) step {
	return func(h *harness) {
		var c *call
		h.until(within, func() bool {
			select {
			case c = <-h.st.calls:
				return true
			default:
				return false
			}
		})
		if c == nil {
			h.t.Fatalf("no call within %v, want %q (answers so far: %v)", within, what, h.heard)
		}
		if c.what != what {
			h.t.Fatalf("call %q, want %q (answers so far: %v)", c.what, what, h.heard)
		}
		for _, a := range acts {
			a(h, c)
			h.v.run()
		}
	}
}

// noCall advances the clock d and checks that the actor made no call.
func noCall(d time.Duration) step {
	return func(h *harness) {
		h.v.advance(d)
		select {
		case c := <-h.st.calls:
			h.t.Fatalf("call %q, want none for %v", c.what, d)
		default:
		}
	}
}

// callAfter checks that the actor's next call, what, comes exactly d from
// now: none before (the clock advances to just short of d), then that
// call at d; acts are done with it in order.
func callAfter(d time.Duration, what string, acts ...act) step {
	return func(h *harness) {
		noCall(d - time.Microsecond)(h)
		if h.t.Failed() {
			return
		}
		h.v.advance(time.Microsecond)
		select {
		case c := <-h.st.calls:
			if c.what != what {
				h.t.Fatalf("call %q at %v, want %q", c.what, d, what)
			}
			for _, a := range acts {
				a(h, c)
				h.v.run()
			}
		default:
			h.t.Fatalf("no call at %v, want %q", d, what)
		}
	}
}

// until delivers what is queued and checks done; while it is false, it
// advances the clock to the next timer, up to within from now. It
// reports whether done became true.
func (h *harness) until(within time.Duration, done func() bool) bool {
	h.v.run()
	limit := h.v.Now().Add(within)
	for !done() {
		if !h.v.fireBy(limit) {
			return false
		}
	}
	return true
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

// late: what follows comes back d later (the clock advances d).
func late(d time.Duration) act { return func(h *harness, _ *call) { h.v.advance(d) } }

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
func subscriberCount(n int64) act {
	return func(_ *harness, c *call) { c.listen(redisio.Listeners{All: n, Ours: n}, nil) }
}

// foreignCount answers a subscriber count: all connections listen, of
// which ours are lockactor Clients'.
func foreignCount(all, ours int64) act {
	return func(_ *harness, c *call) { c.listen(redisio.Listeners{All: all, Ours: ours}, nil) }
}

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

// poll checks done, advancing the clock timer by timer up to within until
// it holds, and fails the test with the message format, args if it never
// does.
func (h *harness) poll(within time.Duration, done func() bool, format string, args ...any) {
	h.t.Helper()
	if !h.until(within, done) {
		h.t.Fatalf(format, args...)
	}
}
