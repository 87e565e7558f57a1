package actors

import (
	"fmt"
	"testing"

	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// fencedGrant is fenced_lock.lua's reply when granted with token.
func fencedGrant(token uint64) redisio.Reply {
	return redisio.Reply{Val: []any{int64(1), int64(token)}}
}

// token checks the fencing token label's grant carried (after answered).
func token(label string, want uint64) step {
	return func(h *harness) {
		if got := h.acq[label].Result().Token; got != want {
			h.t.Fatalf("%s: token %d, want %d", label, got, want)
		}
	}
}

// loseHold closes own's Lost, as a RedLock coordinator does when it gives
// a member up.
func loseHold(own string) step {
	return func(h *harness) { h.send(&messages.Lose{Owner: "c:" + own}) }
}

// TestLockActor_FencingFloor covers the floor each fenced acquire sends
// (fenced_lock.lua's ARGV[3], shown after ">" in the call) and the grants
// the actor will not hand out: a new hold's token must be above
// every token the Client has seen for the name, whichever owner saw it; a
// reentrant grant keeps its hold's token.
func TestLockActor_FencingFloor(t *testing.T) {
	run(t, KindFenced, []scenario{
		{name: "a hold from zero sends the highest token seen as its floor", steps: []step{
			lock("w", "w", long),
			expect("fenced_lock w>0", reply(fencedGrant(21))),
			answered("w", "granted"), token("w", 21),
			unlock("u", "w"),
			expect("unlock w", reply(released)),
			answered("u", "gone"),
			lock("w2", "w", long),
			expect("fenced_lock w>21", reply(fencedGrant(22))),
			answered("w2", "granted"), token("w2", 22),
		}},
		{name: "another owner of the Client starts from the same floor", steps: []step{
			lock("a", "a", long),
			expect("fenced_lock a>0", reply(fencedGrant(21))),
			answered("a", "granted"),
			unlock("u", "a"),
			expect("unlock a", reply(released)),
			tryLock("b", "b", long),
			expect("fenced_lock b>21", reply(fencedGrant(22))),
			answered("b", "granted"), token("b", 22),
		}},
		{name: "a release never hands off: the next local waiter draws its own token", steps: []step{
			lock("h", "h", long),
			expect("fenced_lock h>0", reply(fencedGrant(21))),
			answered("h", "granted"),
			lock("w", "w", long),
			noCall(5 * ms), // the holder's lease refuses it: no attempt
			unlock("u", "h"),
			expect("unlock h", reply(released)),
			answered("u", "gone"),
			expect("fenced_lock w>21", reply(fencedGrant(22))),
			answered("w", "granted"), token("w", 22),
		}},
		{name: "a reentrant grant sends its hold's token less one and keeps the token", steps: []step{
			lock("w", "w", long),
			expect("fenced_lock w>0", reply(fencedGrant(21))),
			answered("w", "granted"),
			lock("w2", "w", long),
			expect("fenced_lock w>20", reply(fencedGrant(25))),
			answered("w2", "granted"), token("w2", 21),
		}},
		{name: "a new hold's token not above one seen is given back, and the retry rises above it", steps: []step{
			lock("a", "a", long),
			expect("fenced_lock a>0", reply(fencedGrant(21))),
			answered("a", "granted"),
			unlock("u", "a"),
			expect("unlock a", reply(released)),
			lock("w", "w", long),
			expect("fenced_lock w>21", reply(fencedGrant(21))), // as a script without the floor would
			expect("unlock w", reply(released)),
			expect("fenced_lock w>21", reply(fencedGrant(22))),
			answered("w", "granted"), token("w", 22),
		}},
		{name: "a TryLock given back for its token tries once more after the give-back", steps: []step{
			lock("a", "a", long),
			expect("fenced_lock a>0", reply(fencedGrant(21))),
			answered("a", "granted"),
			unlock("u", "a"),
			expect("unlock a", reply(released)),
			tryLock("w", "w", long),
			expect("fenced_lock w>21", reply(fencedGrant(19))),
			expect("unlock w", reply(released)),
			expect("fenced_lock w>21", reply(fencedGrant(22))),
			answered("w", "granted"), token("w", 22),
		}},
		{name: "a reentrant grant whose hold was lost meanwhile must rise above the hold's token", steps: []step{
			lock("w", "w", long),
			expect("fenced_lock w>0", reply(fencedGrant(21))),
			answered("w", "granted"),
			lock("w2", "w", long),
			expect("fenced_lock w>20", keep("re")),
			loseHold("w"), // the hold is gone: the reentrant grant would start a new one
			later("re", reply(fencedGrant(21))),
			expect("unlock w", reply(released)),
			expect("fenced_lock w>21", reply(fencedGrant(22))),
			answered("w2", "granted"), token("w2", 22),
		}},
		{name: "a grant given back for the replicas still counts as seen", steps: []step{
			tryLock("w", "w", long),
			expect("fenced_lock w>0", reply(unsynced(fencedGrant(30)))),
			answered("w", failed(redisio.ErrNotReplicated)),
			expect("unlock w", reply(released)),
			lock("w2", "w", long),
			expect("fenced_lock w>30", reply(fencedGrant(31))),
			answered("w2", "granted"), token("w2", 31),
		}},
	})
}

// TestTokenMemory covers the bounded memory of tokens seen: exact for the
// names most recently used, and for the others a floor at least as high as
// every token they were seen with.
func TestTokenMemory(t *testing.T) {
	type op struct {
		name  string
		token uint64 // 0: only read the floor
		want  uint64 // the floor before (saw) or now (floor)
	}
	rows := []struct {
		name  string
		limit int
		ops   []op
		kept  int // names remembered at the end
	}{
		{"a name's floor is its highest token", 4, []op{
			{"x", 0, 0}, {"x", 5, 0}, {"x", 3, 5}, {"x", 0, 5}, {"x", 9, 5}, {"x", 0, 9},
		}, 1},
		{"names do not share floors while remembered", 4, []op{
			{"x", 50, 0}, {"y", 0, 0}, {"y", 2, 0}, {"y", 0, 2}, {"x", 0, 50},
		}, 2},
		{"an evicted name's token becomes the floor of names not remembered", 2, []op{
			{"x", 50, 0}, {"y", 7, 0}, {"z", 3, 0}, // x, the least recently used, goes
			{"x", 0, 50}, {"w", 0, 50}, {"y", 0, 7}, {"z", 0, 3},
		}, 2},
		{"a name remembered again starts from the forgotten floor", 1, []op{
			{"x", 50, 0}, {"y", 7, 0}, // x goes: forgotten 50
			{"x", 0, 50}, {"x", 20, 50}, {"x", 0, 50}, // y goes: forgotten still 50
		}, 1},
		{"reading a floor keeps a name recent", 2, []op{
			{"x", 50, 0}, {"y", 7, 0}, {"x", 0, 50}, {"z", 3, 0}, // y goes, not x
			{"x", 0, 50}, {"q", 0, 7},
		}, 2},
	}
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			m := newTokenMemory(tt.limit)
			for i, o := range tt.ops {
				var got uint64
				what := "floor"
				if o.token == 0 {
					got = m.floor(o.name)
				} else {
					got, what = m.saw(o.name, o.token), fmt.Sprintf("saw %d, floor before", o.token)
				}
				if got != o.want {
					t.Fatalf("op %d, %s: %s = %d, want %d", i, o.name, what, got, o.want)
				}
			}
			if n := m.remembered(); n != tt.kept {
				t.Fatalf("%d names remembered, want %d", n, tt.kept)
			}
		})
	}
	if m := newTokenMemory(0); m.limit != DefaultTokenMemory {
		t.Fatalf("limit %d by default, want %d", m.limit, DefaultTokenMemory)
	}
}

// TestTokenMemoryBounded: a Client that touches many more names than it
// remembers keeps the memory at its limit, and every name it saw still
// gets a floor at or above its highest token.
func TestTokenMemoryBounded(t *testing.T) {
	const limit, names = 64, 5000
	m := newTokenMemory(limit)
	for i := range names {
		m.saw(fmt.Sprint("n", i), uint64(i%97+1))
	}
	if n := m.remembered(); n != limit {
		t.Fatalf("%d names remembered, want %d", n, limit)
	}
	for i := range names {
		if f := m.floor(fmt.Sprint("n", i)); f < uint64(i%97+1) {
			t.Fatalf("n%d: floor %d below its token %d", i, f, i%97+1)
		}
	}
}
