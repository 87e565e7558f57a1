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
