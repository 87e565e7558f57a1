package actors

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/lockactor/lockactor/messages"
)

// What a master switch's read of the new master does to a hold (reread,
// endBy): a missing hold is lost at once; one the new master keeps for
// less time than the runtime counted on ends then, and until the last read
// no renewal moves a watchdog hold past that.
func TestRereadAfterSwitch(t *testing.T) {
	const watchdog = 30 * time.Second
	k := holdKey{"client:1", messages.Exclusive}
	for _, tc := range []struct {
		name     string
		lease    time.Duration // 0: watchdog
		left     time.Duration // what the new master said
		final    bool
		released bool // the hold was released before the answer came
		renew    bool // a renewal is confirmed after the answer
		lostBy   time.Duration
		lost     bool // Lost must close by lostBy (else stay open that long)
		dropped  bool // the hold is off the record at once
	}{
		{name: "watchdog hold missing there", left: 0, lost: true, dropped: true},
		{name: "fixed-lease hold missing there", lease: 20 * time.Second, left: 0, lost: true, dropped: true},
		{name: "fixed lease that ends sooner there", lease: 20 * time.Second, left: 150 * time.Millisecond, lostBy: time.Second, lost: true},
		{name: "fixed lease kept as long there", lease: 20 * time.Second, left: 20 * time.Second, lostBy: 300 * time.Millisecond},
		{name: "watchdog hold kept there briefly", left: 150 * time.Millisecond, lostBy: time.Second, lost: true},
		{name: "renewal while following counts only to the new master's end", left: 150 * time.Millisecond, renew: true, lostBy: time.Second, lost: true},
		{name: "renewal after the last read counts again", left: 150 * time.Millisecond, final: true, renew: true, lostBy: 500 * time.Millisecond},
		{name: "no TTL there: nothing to cap", left: -1, lostBy: 300 * time.Millisecond},
		{name: "released before the answer", left: 0, released: true, lostBy: 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hb, v := bookOn(watchdog)
			h := hb.granted(k, v.Now(), tc.lease, 0, nil)
			h.offer() // the grant reached its caller
			defer h.stopDeadline()
			read := &holdsRead{keys: []holdKey{k}, holds: []*hold{h}, left: []time.Duration{tc.left},
				sent: v.Now(), recv: v.Now(), final: tc.final}
			if tc.released {
				hb.giveUp(k)
			}
			hb.reread(read)
			if tc.renew {
				h.confirm(v.Now(), watchdog)
			}
			if _, kept := hb.holds[k]; kept == tc.dropped && !tc.released {
				t.Errorf("hold on the record: %v, want %v", kept, !tc.dropped)
			}
			v.advance(max(tc.lostBy, 10*time.Millisecond))
			switch closed := h.isLost(); {
			case closed && !tc.lost:
				t.Fatal("Lost closed")
			case !closed && tc.lost:
				t.Fatalf("Lost still open %v after the read", tc.lostBy)
			}
		})
	}
}

// A read that finds more time than an earlier one moves a watchdog hold's
// deadline back: the earlier read may have been delayed by a paused new
// master (its TTL read late, its end computed from the send time), and a
// hold that is still there must not be reported lost at that stale end.
func TestRereadMovesDeadlineBack(t *testing.T) {
	const watchdog = 30 * time.Second
	k := holdKey{"client:1", messages.Exclusive}
	hb, v := bookOn(watchdog)
	h := hb.granted(k, v.Now(), 0, 0, nil)
	h.offer() // the grant reached its caller
	defer h.stopDeadline()
	read := func(left time.Duration, final bool) {
		now := v.Now()
		hb.reread(&holdsRead{keys: []holdKey{k}, holds: []*hold{h}, left: []time.Duration{left}, sent: now, recv: now, final: final})
	}
	read(150*time.Millisecond, false) // delayed: the end looks near
	h.confirm(v.Now(), watchdog)      // a renewal while following: capped there
	read(watchdog, true)              // the last read: the key has its full lease
	v.advance(watchdog - time.Millisecond)
	if h.isLost() {
		t.Fatal("Lost closed at the stale end of an earlier read")
	}
}

// A deadline's timer that fires as its hold is released (Stop comes too
// late to keep its function from running) closes nothing once the release
// is recorded: Lost closes before the release is answered, or never. The
// torture suite saw the race after a master switch had set a fixed-lease
// hold's deadline to its lease's end and the owner unlocked right then.
func TestDeadlineRacingReleaseClosesNothing(t *testing.T) {
	k := holdKey{"client:1", messages.Exclusive}
	for _, tc := range []struct {
		name     string
		lease    time.Duration // 0: watchdog
		released bool
	}{
		{name: "watchdog hold, released", released: true},
		{name: "fixed-lease hold after a switch, released", lease: 20 * time.Second, released: true},
		{name: "watchdog hold, still held"},
		{name: "fixed-lease hold after a switch, still held", lease: 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hb, v := bookOn(time.Minute)
			h := hb.granted(k, v.Now(), tc.lease, 0, nil)
			h.offer()                        // the grant reached its caller
			h.loseAt(v.Now().Add(time.Hour)) // as endBy arms it
			defer h.stopDeadline()
			if tc.released {
				hb.giveUp(k)
			}
			h.timeUp() // the timer's function, as if it fired just before Stop
			if closed := h.isLost(); closed == tc.released {
				t.Errorf("Lost closed: %v, want %v", closed, !tc.released)
			}
		})
	}
}

// bookOn is the hold book of an actor of a bare runtime on a virtual
// clock, as a message that arrives now sees it; advancing the clock moves
// the actor's reading with it.
func bookOn(watchdog time.Duration) (*holdBook, *clockedVirtual) {
	v := &clockedVirtual{virtual: newVirtual()}
	rt := &Runtime{cfg: Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}.withDefaults(), sched: v.virtual}
	v.b = &base{rt: rt, key: Key{KindLock, "x"}}
	v.b.readClock()
	hb := newHoldBook(v.b, watchdog)
	return &hb, v
}

// clockedVirtual is a virtual clock whose advance also moves a bare
// actor's reading of it, as its next message would.
type clockedVirtual struct {
	*virtual
	b *base
}

func (v *clockedVirtual) advance(d time.Duration) {
	v.virtual.advance(d)
	v.b.readClock()
}

// A switch's read of the new master that finds a hold missing is lost
// there, and Lost closes; an Unlock that reaches the actor after that
// read hears ErrNotHeld, whatever the release finds in Redis: it may reach
// the former master, which still has the hold (the Conn's scripts go there
// until the runtime routes them to the new one), and Unlock returning nil
// with Lost closed during it would say the hold was released, not lost (a
// strict Sentinel torture run, lost-after-release on a fair lock).
func TestUnlockAfterSwitchFoundHoldGone(t *testing.T) {
	for _, kind := range []Kind{KindFair, KindLock} {
		acquire, release := "fair_lock w", "fair_unlock w"
		if kind == KindLock {
			acquire, release = "lock w", "unlock w"
		}
		t.Run(kind.tag(), func(t *testing.T) {
			run(t, kind, []scenario{
				{name: "read just ahead of the Unlock: not held", steps: []step{
					lock("w", "w", 0),
					expect(acquire, reply(granted)),
					answered("w", "granted"),
					lostClosed("w", false),
					// Its answer reaches the actor as the owner calls Unlock.
					together(switchRead("w", 0), unlock("u", "w")),
					expect(release, reply(released)), // the former master had it
					answered("u", "notheld"),
					lostClosed("w", true),
				}},
				{name: "read after the Unlock: released", steps: []step{
					lock("w", "w", 0),
					expect(acquire, reply(granted)),
					answered("w", "granted"),
					unlock("u", "w"),
					switchRead("w", 0),
					expect(release, reply(released)),
					answered("u", "gone"),
					lostClosed("w", false),
				}},
				{name: "a fixed lease run out by the local count before the Unlock: not held", steps: []step{
					lock("w", "w", time.Second),
					expect(acquire, reply(granted)),
					answered("w", "granted"),
					noCall(time.Second + time.Millisecond),
					lostClosed("w", true),
					unlock("u", "w"),
					expect(release, reply(released)), // Redis counts the lease from later
					answered("u", "notheld"),
				}},
				{name: "hold kept there: released", steps: []step{
					lock("w", "w", 0),
					expect(acquire, reply(granted)),
					answered("w", "granted"),
					switchRead("w", time.Minute),
					unlock("u", "w"),
					expect(release, reply(released)),
					answered("u", "gone"),
					lostClosed("w", false),
				}},
			})
		})
	}
}

// together does steps with nothing delivered between them: their
// messages reach the actor one after the other.
func together(steps ...step) step {
	return func(h *harness) {
		for _, s := range steps {
			s(h)
		}
	}
}

// switchRead delivers what a re-read after a master switch found of own's
// exclusive hold on the new master: left (0: missing), read just now.
func switchRead(own string, left time.Duration) step {
	return func(h *harness) {
		e, ok := h.rt.locks.Load(h.key)
		if !ok {
			h.t.Fatalf("no actor for %v", h.key)
		}
		var hb *holdBook
		switch a := e.(*entry).box.(*vbox).m.(type) {
		case *fairActor:
			hb = &a.holdBook
		case *lockActor:
			hb = &a.holdBook
		default:
			h.t.Fatalf("no hold book in %T", a)
		}
		k := holdKey{"c:" + own, messages.Exclusive}
		now := h.v.Now()
		h.send(&holdsRead{keys: []holdKey{k}, holds: []*hold{hb.holds[k]}, left: []time.Duration{left}, sent: now, recv: now})
	}
}
