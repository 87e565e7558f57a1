package actors

import (
	"testing"
	"time"

	"github.com/lockactor/lockactor/internal/syncx"
	"github.com/lockactor/lockactor/messages"
)

// A caller's Lost channel, taken before it held (messages.Acquire.Lost),
// is closed only by a hold a grant of it reached. A grant given back at
// once (its caller had gone) gives the channel back for the caller's next
// hold, and that hold's loss, even at its fixed lease's end, closes
// nothing: once it did, and the handle's next hold saw its Lost closed
// after a clean Unlock (found by the torture suite).
func TestLostChannelOfAGrantNobodyTook(t *testing.T) {
	k := holdKey{"client:1", messages.Exclusive}
	tests := []struct {
		name      string
		taken     bool          // the grant reached its caller
		lease     time.Duration // 0: lost by a renewal's finding; else its deadline
		wantShut  bool
		wantClaim bool // the channel still belongs to this hold
	}{
		{"taken, lost", true, 0, true, true},
		{"taken, fixed lease ran out", true, 20 * time.Millisecond, true, true},
		{"given back, lost", false, 0, false, false},
		{"given back, fixed lease ran out", false, 20 * time.Millisecond, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hb, v := bookOn(time.Minute)
			m := &messages.Acquire{Owner: k.owner, Lease: tc.lease, Lost: messages.NewLostChan()}
			h := hb.granted(k, v.Now(), tc.lease, 0, m.Lost)
			defer h.stopDeadline()
			if h.lost != m.Lost.C {
				t.Fatal("the hold did not take the caller's channel")
			}
			first := h.offer()
			if !tc.taken {
				h.withdraw(m, first)
			}
			if tc.lease == 0 {
				h.lose()
			} else {
				v.advance(tc.lease) // the deadline fires at the lease's end
			}
			if got := syncx.Closed(m.Lost.C); got != tc.wantShut {
				t.Fatalf("caller's channel closed: %v, want %v", got, tc.wantShut)
			}
			if got := m.Lost.Claimed(); got != tc.wantClaim {
				t.Fatalf("channel claimed: %v, want %v", got, tc.wantClaim)
			}
		})
	}
}

// A release that finds nothing held closes Lost, except an earlier
// release of a reentrant hold that comes back after the owner's last one
// (sent again after a failure, behind it): the last release speaks for the
// hold, and may have been answered already.
func TestReleaseFindingNothingClosesLostOnce(t *testing.T) {
	k := holdKey{"client:1", messages.Exclusive}
	for _, tc := range []struct {
		name     string
		unlocks  int  // Unlocks of the owner's two holds before the reply
		whose    int  // the reply is for the release of this Unlock (1 or 2)
		wantLost bool // Lost closes
	}{
		{name: "first release, hold still held", unlocks: 1, whose: 1, wantLost: true},
		{name: "first release, after the last Unlock", unlocks: 2, whose: 1},
		{name: "last release", unlocks: 2, whose: 2, wantLost: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hb, v := bookOn(30 * time.Second)
			hb.granted(k, v.Now(), time.Minute, 0, nil)
			h := hb.granted(k, v.Now(), time.Minute, 0, nil)
			h.offer()
			defer h.stopDeadline()
			var q owedQueue
			for range tc.unlocks {
				hb.owe(&q, k, nil)
			}
			hb.foundGone(q.items[tc.whose-1])
			if h.isLost() != tc.wantLost {
				t.Fatalf("Lost closed: %v, want %v", h.isLost(), tc.wantLost)
			}
		})
	}
}

// A renewal's (or a handle's Extend's) success that comes back after the
// hold's deadline does not revive the hold: it was over by then, though
// the deadline's timer had not run yet (a stalled process fires it late);
// nor does the watchdog send a renewal for a hold past its deadline. Found by the strict Sentinel
// torture: a read hold whose last confirmed renewal was sent at T kept its
// Lost open 1.2 s past T plus the lease, because a renewal sent 0.1 ms
// after that found the field (kept alive on the master by a renewal no
// replica had confirmed) and was taken as extending the hold.
func TestRenewalAfterTheDeadline(t *testing.T) {
	const wd = 3 * time.Second
	k := holdKey{"client:1", messages.Exclusive}
	tests := []struct {
		name     string
		recv     time.Duration // when the reply came, after the grant
		wantLost bool
	}{
		{"reply before the deadline", wd - time.Millisecond, false},
		{"reply at the deadline", wd, false},
		{"reply after the deadline", wd + time.Millisecond, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hb, v := bookOn(wd)
			granted := v.Now()
			h := hb.granted(k, granted, 0, 0, messages.NewLostChan())
			defer h.stopDeadline()
			h.offer()
			sent := granted.Add(wd - time.Millisecond) // in time; the reply is what may be late
			lost := hb.renewed(&renewed{k: k, h: h, sent: sent, recv: granted.Add(tc.recv), ok: true})
			if lost != tc.wantLost || h.isLost() != tc.wantLost {
				t.Fatalf("renewed reported lost %v, Lost closed %v; want %v", lost, h.isLost(), tc.wantLost)
			}
			if want := sent.Add(wd); !tc.wantLost && !h.ends.Equal(want) {
				t.Fatalf("deadline %v after the grant, want %v", h.ends.Sub(granted), want.Sub(granted))
			}
		})
	}
	for _, tc := range tests {
		t.Run("Extend, "+tc.name, func(t *testing.T) {
			hb, v := bookOn(wd)
			granted := v.Now()
			h := hb.granted(k, granted, wd, 0, messages.NewLostChan()) // a fixed lease, as long
			defer h.stopDeadline()
			h.offer()
			m := &messages.Extend{Owner: k.owner, Mode: k.mode, Lease: wd, Handle: true, Reply: make(chan messages.ExtendResult, 1)}
			lost := hb.extended(&extended{m: m, h: h, sent: granted.Add(wd - time.Millisecond), recv: granted.Add(tc.recv), ok: true})
			if res := <-m.Reply; lost != tc.wantLost || h.isLost() != tc.wantLost || res.OK == tc.wantLost {
				t.Fatalf("extended reported lost %v, Lost closed %v, answered OK %v; want lost %v", lost, h.isLost(), res.OK, tc.wantLost)
			}
		})
	}
	t.Run("renewal due after the deadline", func(t *testing.T) {
		hb, v := bookOn(wd)
		h := hb.granted(k, v.Now(), 0, 0, messages.NewLostChan())
		defer h.stopDeadline()
		h.offer()
		hb.b.now = v.Now().Add(wd + time.Millisecond) // the actor's clock is past the deadline; its timer has not run
		sent := 0
		lost := hb.renewAll(func(holdKey, time.Duration, func() bool, func(bool, error)) { sent++ })
		if !lost || sent != 0 || !h.isLost() {
			t.Fatalf("renewAll reported lost %v, sent %d renewals, Lost closed %v; want lost, none sent", lost, sent, h.isLost())
		}
	})
}
