package actors

import (
	"errors"
	"testing"
	"time"

	"github.com/lockactor/lockactor/messages"
)

// A release the new master does not have is released again, and only
// then: never a field a hold of this Client uses now, nor one whose
// release is already owed, nor one the new master does not have.
func TestGhostReleasedAgainOnlyWhenNobodyUsesItsField(t *testing.T) {
	const watchdog = 30 * time.Second
	mine := holdKey{"client:1", messages.Exclusive}
	other := holdKey{"client:2", messages.Exclusive}
	for _, tc := range []struct {
		name   string
		left   time.Duration // what the new master has of mine's field; 0: nothing
		holder *holdKey      // a hold granted since the release
		relay  bool          // that hold is relayed from mine (kept under its field)
		owed   bool          // a release of mine's field is owed already
		want   bool          // a ghost release of mine's field is owed after
	}{
		{name: "lost release", left: 8 * time.Second, want: true},
		{name: "lost release, key without TTL", left: -1, want: true},
		{name: "release that stood", left: 0},
		{name: "owner holds again", left: 8 * time.Second, holder: &mine},
		{name: "another owner holds under its field (relay)", left: 8 * time.Second, holder: &other, relay: true},
		{name: "another owner holds under its own field", left: 8 * time.Second, holder: &other, want: true},
		{name: "its release is owed already", left: 8 * time.Second, owed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hb, v := bookOn(watchdog)
			var q owedQueue
			if tc.owed {
				q.push(&owed{k: mine, field: mine.owner, due: v.Now()})
			}
			read := &holdsRead{released: []holdKey{mine}, releasedLeft: []time.Duration{tc.left}}
			hb.ghostsIn(read)
			if tc.holder != nil { // granted after the read, before the ledger was free
				h := hb.granted(*tc.holder, v.Now(), time.Minute, 0, nil)
				if tc.relay {
					h.field = mine.owner
				}
				defer h.stopDeadline()
			}
			hb.promoteGhosts(&q)
			var got *owed
			for _, o := range q.items {
				if o.ghost {
					got = o
				}
			}
			if (got != nil) != tc.want {
				t.Fatalf("ghost release owed: %v, want %v", got != nil, tc.want)
			}
			if len(hb.ghosts) != 0 {
				t.Errorf("%d ghosts kept after promotion", len(hb.ghosts))
			}
			if got == nil {
				return
			}
			if got.field != mine.owner || got.k != mine || got.lease <= 0 || got.h != nil {
				t.Errorf("ghost release %+v", got)
			}
			// The script took one of several holds: the rest go too.
			q.next(v.Now())
			hb.releasedAgain(&q, got, true)
			if q.len() != 1 {
				t.Errorf("after a partial release %d owed, want the ghost again", q.len())
			}
		})
	}
}

// Only a runtime that follows a master remembers releases, and only for
// releasedKeep.
func TestReleasedBookKeepsRecentReleases(t *testing.T) {
	rt := &Runtime{}
	key := Key{KindLock, "x"}
	k := holdKey{"client:1", messages.Exclusive}
	t0 := time.Unix(1000, 0)
	rt.noteReleased(key, k, t0)
	if got := rt.releasedOn(key, t0.Add(-time.Second)); len(got) != 0 {
		t.Fatalf("a runtime that does not watch remembered %v", got)
	}
	rt.watches = true
	rt.noteReleased(key, k, t0)
	if got := rt.releasedOn(key, t0.Add(-time.Second)); len(got) != 1 || got[0] != k {
		t.Fatalf("releasedOn = %v, want [%v]", got, k)
	}
	if keys := rt.releasedLocks(t0.Add(-time.Second)); len(keys) != 1 || keys[0] != key {
		t.Fatalf("releasedLocks = %v, want [%v]", keys, key)
	}
	if keys := rt.releasedLocks(t0.Add(time.Second)); len(keys) != 0 {
		t.Fatalf("releasedLocks after the cutoff = %v, want none", keys)
	}
	if got := rt.releasedOn(key, t0.Add(-time.Second)); len(got) != 0 {
		t.Fatalf("forgotten release still listed: %v", got)
	}
}

// A release is remembered from the moment it is owed, not only once Redis
// confirms it: a switch's last read can fall while it is on its way to the
// old master (a strict torture run lost a 10 s hold's release that way).
func TestReleaseRememberedWhenOwed(t *testing.T) {
	hb, v := bookOn(30 * time.Second)
	hb.b.rt.watches = true
	k := holdKey{"client:1", messages.Exclusive}
	h := hb.granted(k, v.Now(), time.Minute, 0, nil)
	defer h.stopDeadline()
	var q owedQueue
	hb.owe(&q, k, nil)
	if got := hb.b.rt.releasedOn(hb.b.key, v.Now().Add(-time.Second)); len(got) != 1 || got[0] != k {
		t.Fatalf("released fields after the Unlock = %v, want [%v]", got, k)
	}
}

// A ghost release that fails is not retried: it was best effort, and the
// next read after a switch finds the field again if it is still there.
func TestGhostReleaseFailureIsNotRetried(t *testing.T) {
	hb, v := bookOn(30 * time.Second)
	var q owedQueue
	o := &owed{k: holdKey{"client:1", messages.Exclusive}, field: "client:1", lease: time.Second, due: v.Now(), ghost: true}
	hb.retryOwed(&q, o, errors.New("READONLY You can't write against a read only replica."))
	if q.len() != 0 {
		t.Fatalf("%d releases owed after the ghost release failed, want none", q.len())
	}
}
