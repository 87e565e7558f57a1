package lockactor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockactor/lockactor/actors"
	"github.com/lockactor/lockactor/messages"
)

// multiLockNodeTimeout is how long a MultiLock's coordinator waits for one
// member's answer in a round: its members usually share one Redis, so it is
// generous (a RedLock's is in redlock.go).
const multiLockNodeTimeout = 2 * time.Second

// groupIDs names coordinators uniquely within the process.
var groupIDs atomic.Int64

// group is what MultiLock and RedLock share: the member handles and the
// coordinator actor that runs their rounds. The coordinator lives in the
// first member's Client and reaches the members' own lock actors, in
// whichever Client each belongs to.
type group struct {
	locks []*Lock
	what  kind   // kindMulti or kindRed, in errors and metrics
	name  string // for errors: the member names
	label string // lock.name in the metrics: redlock[a,b,c]
	err   error  // a construction error, returned by every call
	key   actors.Key
	g     actors.Group
	since *heldSince // when the current hold was granted (lockactor.hold.duration)
	box   *lostBox   // what Lost returns
}

// heldSince is when a group's current hold was granted; zero when none.
type heldSince struct {
	mu sync.Mutex
	at time.Time
}

// swap stores t and returns what was stored.
func (h *heldSince) swap(t time.Time) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.at
	h.at = t
	return old
}

func newGroup(kind kind, locks []*Lock) group {
	names := make([]string, len(locks))
	gr := group{locks: locks, what: kind, since: new(heldSince), box: new(lostBox)}
	for i, l := range locks {
		if l == nil {
			gr.err = fmt.Errorf("%w: %s member %d is nil", ErrInvalidArgument, kind, i)
			names[i] = "<nil>"
			continue
		}
		names[i] = l.name
		switch {
		case l.name == "":
			gr.err = fmt.Errorf("%w: %s member %d has an empty name", ErrInvalidArgument, kind, i)
		case l.c.cluster && !slotSafe(l.name):
			gr.err = fmt.Errorf("%w: %s member %d %q: %s", ErrInvalidArgument, kind, i, l.name, slotProblem)
		}
	}
	gr.name = strings.Join(names, ",")
	gr.label = kind.String() + "[" + gr.name + "]"
	if len(locks) == 0 {
		gr.err = fmt.Errorf("%w: %s with no locks", ErrInvalidArgument, kind)
	}
	if gr.err != nil {
		return gr
	}
	gr.key = actors.Key{Kind: actors.KindGroup, Name: fmt.Sprintf("%s#%d", kind, groupIDs.Add(1))}
	gr.g = actors.Group{Quorum: len(locks), NodeTimeout: multiLockNodeTimeout, ValidUntil: new(atomic.Int64)}
	if kind == kindRed {
		gr.g.Quorum = len(locks)/2 + 1
		gr.g.Redlock = true
		gr.g.Lease = locks[0].c.opts.watchdog
		gr.g.NodeTimeout = redLockNodeTimeout
	}
	for _, l := range locks {
		gr.g.Members = append(gr.g.Members, actors.Member{RT: l.c.rt, Key: l.key, Owner: l.owner, Mode: l.mode})
	}
	return gr
}

// home is the Client whose runtime hosts the coordinator.
func (gr *group) home() *Client { return gr.locks[0].c }

func (gr *group) send(msg any) error { return gr.home().rt.SendGroup(gr.key, gr.g, msg) }

func (gr *group) check(ctx context.Context) error {
	switch {
	case gr.err != nil:
		return gr.what.err(gr.name, gr.err)
	case ctx == nil:
		return gr.what.invalid(gr.name, "nil context")
	case gr.home().closed():
		return gr.what.closed(gr.name)
	}
	return nil
}

// acquire runs rounds on the coordinator until the group is held, the wait
// bound (TryLock only) or ctx ends, or errors alone make the quorum
// impossible (members that did not answer within the node timeout count
// only once no wait is left: they may answer the next round); the call is
// recorded in the home Client's metrics.
func (gr *group) acquire(ctx context.Context, opts []LockOption, tryOnly bool) (bool, error) {
	if err := gr.check(ctx); err != nil {
		return false, err
	}
	start := time.Now()
	ok, err := gr.ask(ctx, opts, tryOnly)
	gr.home().metrics.acquisition(ctx, gr.what, gr.label, start, ok, err)
	if ok {
		gr.since.swap(time.Now())
	}
	return ok, err
}

// ask is acquire without the checks and the metrics.
func (gr *group) ask(ctx context.Context, opts []LockOption, tryOnly bool) (bool, error) {
	o, err := lockOptionsOf(gr.what, gr.name, opts)
	if err != nil {
		return false, err
	}
	if !tryOnly && o.wait != 0 {
		return false, gr.what.invalid(gr.name, waitOnLock)
	}
	m := &messages.Acquire{Lease: o.lease, Wait: o.wait, TryOnly: tryOnly && o.wait == 0, Req: messages.NewRequest(),
		Lost: gr.box.forNext()}
	res, err := await(ctx, gr.send, gr.home().done, m, nil, func() {
		_ = gr.send(&messages.Release{})
	})
	switch {
	case err != nil:
		return false, gr.what.err(gr.name, err)
	case res.Err != nil:
		return false, gr.what.err(gr.name, fmt.Errorf("%w: %w", ErrNoQuorum, memberErrors(res.Err)))
	case !res.Granted:
		return false, nil
	}
	gr.box.held(res.Lost)
	for i, part := range res.Parts {
		if part.Granted {
			gr.locks[i].granted(part.Lost, part.Token, part.Field)
		}
	}
	return true, nil
}

// Lock waits until the group is held or ctx ends; WithWait is
// ErrInvalidArgument, as for Lock.
func (gr *group) Lock(ctx context.Context, opts ...LockOption) error {
	ok, err := gr.acquire(ctx, opts, false)
	if err == nil && !ok {
		err = gr.what.err(gr.name, ErrNoQuorum)
	}
	return err
}

// TryLock makes one round, or rounds until WithWait runs out; (false, nil)
// when the members were taken by others.
func (gr *group) TryLock(ctx context.Context, opts ...LockOption) (bool, error) {
	return gr.acquire(ctx, opts, true)
}

// Lost is closed when the current hold ends before its Unlock: for a
// MultiLock, when any member's hold is lost; for a RedLock, when fewer than
// a majority still hold or its validity is spent. Taken while nothing is
// held, it is the channel the next hold will close.
func (gr *group) Lost() <-chan struct{} { return gr.box.get() }

// Unlock releases every member, including those that did not answer when
// the group was acquired.
func (gr *group) Unlock(ctx context.Context) error {
	if err := gr.check(ctx); err != nil {
		return err
	}
	called := time.Now()
	res, err := gr.home().release(ctx, gr.send, &messages.Release{})
	if err == nil && !res.NotHeld {
		gr.home().metrics.held(ctx, gr.what, gr.label, gr.since.swap(time.Time{}), called)
	}
	if err == nil {
		gr.box.free()
		for _, l := range gr.locks {
			l.heldNothing()
		}
	}
	switch {
	case err != nil:
		return releaseErr(gr.what, gr.name, res, err) // the members' releases go on
	case res.NotHeld:
		return gr.what.err(gr.name, ErrNotHeld)
	case res.Err != nil:
		return gr.what.err(gr.name, fmt.Errorf("%w: %w", ErrNoQuorum, memberErrors(res.Err)))
	}
	return nil
}

// A MultiLock holds all of its locks or none (RedissonMultiLock). The locks
// may come from different Clients; each member keeps its own watchdog.
type MultiLock struct{ group }

// NewMultiLock groups locks: all members or none, acquired in parallel; on
// failure everything taken is released. Unlock releases every member even
// when one fails and reports a joined error. No locks or a nil lock surface
// as ErrInvalidArgument from the first call.
func NewMultiLock(locks ...*Lock) *MultiLock {
	return &MultiLock{newGroup(kindMulti, locks)}
}

var _ Locker = (*MultiLock)(nil)
