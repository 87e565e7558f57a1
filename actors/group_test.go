package actors

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockactor/lockactor/messages"
)

// groupShape is the coordinator a group row drives: members lock actors
// named "a", "b", ... on the harness's runtime, each held by the owner of
// its own name (so that its calls read "lock a", "unlock b"), and a quorum
// of them.
type groupShape struct {
	members     int
	quorum      int
	redlock     bool
	lease       time.Duration // a RedLock's lease without WithLease
	nodeTimeout time.Duration
}

// multiLock is a MultiLock of n members; redLock a RedLock of n with a
// majority and lease; each round waits 100 ms for its members.
func multiLock(n int) *groupShape { return &groupShape{members: n, quorum: n, nodeTimeout: 100 * ms} }

func redLock(n int, lease time.Duration) *groupShape {
	return &groupShape{members: n, quorum: n/2 + 1, redlock: true, lease: lease, nodeTimeout: 100 * ms}
}

func (s *groupShape) build(rt *Runtime) *Group {
	g := &Group{Quorum: s.quorum, Redlock: s.redlock, Lease: s.lease, NodeTimeout: s.nodeTimeout, ValidUntil: new(atomic.Int64)}
	for i := range s.members {
		name := string(rune('a' + i))
		g.Members = append(g.Members, Member{RT: rt, Key: Key{Kind: KindLock, Name: name}, Owner: "c:" + name})
	}
	return g
}

// validFor checks the RedLock's published validity: exactly d left now.
func validFor(d time.Duration) step {
	return func(h *harness) {
		if got := ValidityLeft(h.group.ValidUntil.Load(), h.v.Now()); got != d {
			h.t.Fatalf("validity left %v, want %v", got, d)
		}
	}
}

// grantAll answers the members' acquire calls, in the order they were
// made, with a grant.
func grantAll(names ...string) []step {
	var steps []step
	for _, n := range names {
		steps = append(steps, expect("lock "+n, reply(granted)))
	}
	return steps
}

// acquireWait is a Lock call that waits at most wait (TryLock WithWait).
func acquireWait(label string, wait time.Duration) step {
	return func(h *harness) {
		req := messages.NewRequest()
		h.acq[label] = req
		h.send(&messages.Acquire{Owner: "c:" + label, Wait: wait, Req: req})
	}
}

// memberErr is how a member's failure reads in a group's answer.
func memberErr(name string, err error) error { return &MemberError{Name: name, Err: err} }

// TestGroupActor covers the coordinator of a MultiLock and a RedLock:
// rounds decided by every answer, by a hopeless quorum or by the node
// timeout; partial holds given back before the caller hears; retries;
// validity and renewal to the millisecond; and a hold's Lost.
func TestGroupActor(t *testing.T) {
	run(t, KindGroup, []scenario{
		{name: "MultiLock: every member granted, then Unlock releases each", group: multiLock(3), steps: slices.Concat(
			[]step{lock("g", "g", 0)},
			grantAll("a", "b", "c"),
			[]step{
				answered("g", "granted"),
				unlock("u", "g"),
				expect("unlock a", reply(released)),
				expect("unlock b", reply(released)),
				expect("unlock c", reply(released)),
				answered("u", "ok"),
			})},
		{name: "MultiLock TryLock: one refusal ends the round, and the caller hears only once the partial hold is given back", group: multiLock(3), steps: []step{
			tryLock("g", "g", 0),
			expect("lock a", reply(granted)),
			expect("lock b", reply(refused(time.Second))),
			expect("lock c", keep("c")), // abandoned: the round is hopeless
			expect("unlock a", keep("a")),
			unanswered("g"),
			later("a", reply(released)),
			answered("g", "refused"),
			later("c", reply(granted)), // c's actor gives its late grant back itself
			expect("unlock c", reply(released)),
		}},
		{name: "MultiLock Lock: a refused round is retried 5 to 50 ms after its partial hold is given back", group: multiLock(2), steps: []step{
			lock("g", "g", 0),
			expect("lock a", reply(granted)),
			expect("lock b", reply(refused(time.Second))),
			expect("unlock a", reply(released)),
			noCall(5*ms - time.Microsecond),
			expectWithin(45*ms+time.Microsecond, "lock a", reply(granted)),
			expect("lock b", reply(granted)),
			answered("g", "granted"),
		}},
		{name: "a Lock with a wait bound gets its last round no later than the bound", group: multiLock(2), steps: []step{
			acquireWait("g", 3*ms),
			expect("lock a", reply(refused(time.Second))),
			expect("lock b", reply(refused(time.Second))),
			callAfter(3*ms, "lock a", reply(refused(time.Second))),
			expect("lock b", reply(refused(time.Second))),
			answered("g", "refused"),
		}},
		{name: "a second acquisition of one handle is refused while the first is out", group: multiLock(2), steps: []step{
			lock("g1", "g", 0),
			expect("lock a", keep("a")),
			lock("g2", "g", 0),
			answered("g2", failed(errors.New("another acquisition of this group is in progress"))),
			later("a", reply(granted)),
			expect("lock b", reply(granted)),
			answered("g1", "granted"),
		}},
		{name: "an Unlock that arrives while the round is out runs after it", group: multiLock(2), steps: []step{
			lock("g", "g", 0),
			expect("lock a", keep("a")),
			expect("lock b", reply(granted)),
			unlock("u", "g"),
			later("a", reply(granted)),
			answered("g", "granted"),
			expect("unlock a", reply(released)),
			expect("unlock b", reply(released)),
			answered("u", "ok"),
		}},
		{name: "errors that rule the quorum out answer the caller with every member's error", group: redLock(3, time.Second), steps: []step{
			tryLock("g", "g", 0),
			expect("lock a", fail(errBusy)),
			expect("lock b", fail(errBusy)),
			expect("lock c", reply(granted)),
			expect("unlock c", reply(released)),
			answered("g", failed(errors.Join(memberErr("a", errBusy), memberErr("b", errBusy)))),
		}},
		// CI at 884421c: on a loaded machine 4 of 5 members' first replies
		// took longer than the node timeout, and a TryLock with 5 s to
		// wait failed at once with ErrNoQuorum.
		{name: "members silent past the node timeout, with time left to wait: another round", group: redLock(3, time.Second), steps: []step{
			lock("g", "g", 0),
			expect("lock a", keep("a")),
			expect("lock b", keep("b")),
			expect("lock c", reply(granted)),
			expect("unlock c", reply(released)),
			unanswered("g"),
			// The next round: a and b still owe the first one's answer, so
			// c is asked first.
			noCall(5*ms - time.Microsecond),
			expectWithin(45*ms+time.Microsecond, "lock c", reply(granted)),
			unanswered("g"),
		}},
		{name: "members silent past the node timeout, no wait left: every member's error", group: redLock(3, time.Second), steps: []step{
			tryLock("g", "g", 0),
			expect("lock a", keep("a")),
			expect("lock b", keep("b")),
			expect("lock c", reply(granted)),
			expect("unlock c", reply(released)),
			answered("g", failed(errors.Join(memberErr("a", errNoAnswer), memberErr("b", errNoAnswer)))),
		}},
		{name: "RedLock: a member silent past the node timeout: the round is decided at exactly the timeout, with the validity it leaves", group: redLock(3, time.Second), steps: []step{
			tryLock("g", "g", 0),
			expect("lock a", reply(granted)),
			expect("lock b", reply(granted)),
			expect("lock c", keep("c")),
			noCall(100*ms - time.Microsecond),
			unanswered("g"),
			noCall(time.Microsecond),
			answered("g", "granted"),
			validFor(time.Second - 100*ms - 12*ms), // the lease, the round, the drift (1% + 2 ms)
			later("c", reply(granted)),             // too late: c's actor gives it back
			expect("unlock c", reply(released)),
		}},
		{name: "RedLock: a round that outlasts its lease is no hold, even with every member", group: redLock(3, 50*ms), steps: []step{
			tryLock("g", "g", 0),
			expect("lock a", late(49*ms), reply(granted)),
			expect("lock b", reply(granted)),
			expect("lock c", reply(granted)),
			expect("unlock a", reply(released)),
			expect("unlock b", reply(released)),
			expect("unlock c", reply(released)),
			answered("g", "refused"),
		}},
		{name: "RedLock renews every lease/3 and moves the validity; Lost closes when fewer than a majority renew", group: redLock(3, 300*ms), steps: slices.Concat(
			[]step{tryLock("g", "g", 0)},
			grantAll("a", "b", "c"),
			[]step{
				answered("g", "granted"),
				validFor(300*ms - 5*ms),
				callAfter(100*ms, "renew a", done(true)),
				expect("renew b", done(true)),
				expect("renew c", done(false)),
				validFor(300*ms - 5*ms),
				callAfter(100*ms, "renew a", done(true)),
				expect("renew b", done(false)),
				lostClosed("g", true),
				validFor(0),
			})},
		{name: "RedLock with a fixed lease: no renewal, and Lost closes when the validity is spent, to the microsecond", group: redLock(3, time.Second), steps: slices.Concat(
			[]step{tryLock("g", "g", 200*ms)},
			grantAll("a", "b", "c"),
			[]step{
				answered("g", "granted"),
				noCall(200*ms - 4*ms - time.Microsecond), // drift of 200 ms: 4 ms
				lostClosed("g", false),
				noCall(time.Microsecond),
				lostClosed("g", true),
			})},
		{name: "MultiLock with a fixed lease: a member's lease end closes the group's Lost", group: multiLock(2), steps: slices.Concat(
			[]step{tryLock("g", "g", 200*ms)},
			grantAll("a", "b"),
			[]step{
				answered("g", "granted"),
				noCall(200*ms - time.Microsecond),
				lostClosed("g", false),
				noCall(time.Microsecond),
				lostClosed("g", true),
			})},
	})
}
