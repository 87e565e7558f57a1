package actors

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/redisio"
)

// fakeStore stands in for redisio.Conn under the state machines' unit
// tests. Every call an actor makes becomes a *call handed to the test, in
// the order the actor made it, and nothing is answered until the test says
// so: a reply comes back when the test gives it, late if the test waits,
// never if the test keeps it, or lost (an error that means "may have run"),
// with the test also deciding whether the lost request ran, which is what a
// later settlement (latch_resolve) finds.
type fakeStore struct {
	calls chan *call

	mu      sync.Mutex
	byLatch map[uint64]*call // latched calls by their Op.Seq, for settlements
	permits int              // a semaphore's count in Redis, as the calls that ran left it
	// autoCount answers subscriber counts at once (see scenario.counts).
	autoCount bool
}

// call is one call an actor made. Exactly one of its answer functions is
// set, by the kind of call.
type call struct {
	what    string // "lock w", "unlock h", "handoff h>w", "resolve unlock h", "sem_acquire 2", ...
	op      redisio.Op
	n       int  // semaphore permits
	ran     bool // the request ran in Redis (its reply may still have been lost)
	then    func(redisio.Reply)
	settled func(redisio.Settlement, redisio.Reply, error)
	flag    func(bool, error)
	stale   func() bool // a renewal's: whether it may still be dropped unsent
	count   func(int64, error)
	listen  func(redisio.Listeners, error) // a subscriber count's
	of      *call                          // a settlement: the call it settles
}

func newFakeStore() *fakeStore {
	return &fakeStore{calls: make(chan *call, 1024), byLatch: make(map[uint64]*call)}
}

// owner strips the test's owner prefix ("c:w" is "w" in a call's name).
func owner(o string) string { return strings.TrimPrefix(o, "c:") }

// latched records a latched script's call; its reply goes to op.Then.
func (f *fakeStore) latched(op redisio.Op, what string, n int) redisio.Reply {
	if op.Then == nil {
		panic("fakeStore: a latched call without Op.Then: " + what)
	}
	c := &call{what: what, op: op, n: n, then: op.Then}
	f.mu.Lock()
	f.byLatch[op.Seq] = c
	f.mu.Unlock()
	f.calls <- c
	return redisio.Reply{Err: redisio.ErrPending}
}

// flagged records a call answered with a flag (a renewal, a cancel); a
// renewal's stale is kept for the test to ask.
func (f *fakeStore) flagged(what string, stale func() bool, then func(bool, error)) {
	f.calls <- &call{what: what, flag: then, stale: stale}
}

func (f *fakeStore) Lock(_ context.Context, op redisio.Op, _, o string, _ time.Duration) redisio.Reply {
	return f.latched(op, "lock "+owner(o), 0)
}

// FencedLock's call names its floor: "fenced_lock w>41".
func (f *fakeStore) FencedLock(_ context.Context, op redisio.Op, _, o string, _ time.Duration, floor uint64, _ bool) redisio.Reply {
	return f.latched(op, fmt.Sprintf("fenced_lock %s>%d", owner(o), floor), 0)
}

func (f *fakeStore) Unlock(_ context.Context, op redisio.Op, _, o string, _ time.Duration) redisio.Reply {
	return f.latched(op, "unlock "+owner(o), 0)
}

func (f *fakeStore) UnlockNoted(_ context.Context, op redisio.Op, _, o string, _ time.Duration, _ string) redisio.Reply {
	return f.latched(op, "unlock_noted "+owner(o), 0)
}

func (f *fakeStore) UnlockQuiet(_ context.Context, op redisio.Op, _, o string, _ time.Duration) redisio.Reply {
	return f.latched(op, "unlock_quiet "+owner(o), 0)
}

// Untold is no Redis call, but rows check when the actor says it: it shows
// up among the calls as "untold".
func (f *fakeStore) Untold(string) { f.calls <- &call{what: "untold"} }

func (f *fakeStore) Handoff(_ context.Context, op redisio.Op, _, o string, _ time.Duration, next string, _ time.Duration) redisio.Reply {
	return f.latched(op, "handoff "+owner(o)+">"+owner(next), 0)
}

func (f *fakeStore) Renew(_ context.Context, _, o string, _ time.Duration, stale func() bool, then func(bool, error)) {
	f.flagged("renew "+owner(o), stale, then)
}

func (f *fakeStore) ReadLock(_ context.Context, op redisio.Op, _, o string, _ time.Duration) redisio.Reply {
	return f.latched(op, "read_lock "+owner(o), 0)
}

func (f *fakeStore) WriteLock(_ context.Context, op redisio.Op, _, o string, _ time.Duration) redisio.Reply {
	return f.latched(op, "write_lock "+owner(o), 0)
}

func (f *fakeStore) ReadUnlock(_ context.Context, op redisio.Op, _, o string) redisio.Reply {
	return f.latched(op, "read_unlock "+owner(o), 0)
}

func (f *fakeStore) WriteUnlock(_ context.Context, op redisio.Op, _, o string, _ time.Duration) redisio.Reply {
	return f.latched(op, "write_unlock "+owner(o), 0)
}

func (f *fakeStore) RWRenew(_ context.Context, _, o string, _ bool, _ time.Duration, stale func() bool, then func(bool, error)) {
	f.flagged("rw_renew "+owner(o), stale, then)
}

func (f *fakeStore) FairLock(_ context.Context, op redisio.Op, _, o string, _, _ time.Duration, _ time.Time, _ bool) redisio.Reply {
	return f.latched(op, "fair_lock "+owner(o), 0)
}

func (f *fakeStore) FairUnlock(_ context.Context, op redisio.Op, _, o string, _ time.Duration, _ time.Time) redisio.Reply {
	return f.latched(op, "fair_unlock "+owner(o), 0)
}

// FairCancel is called only by a stopping fair actor, after the test: it
// is answered at once, and not handed to the test.
func (f *fakeStore) FairCancel(context.Context, string, string, time.Duration, time.Time) (bool, error) {
	return true, nil
}

func (f *fakeStore) FairCancelThen(_ context.Context, _, o string, _ time.Duration, _ time.Time, then func(bool, error)) {
	f.flagged("fair_cancel "+owner(o), nil, then)
}

func (f *fakeStore) SemaphoreAcquire(_ context.Context, op redisio.Op, _ string, n int) redisio.Reply {
	return f.latched(op, fmt.Sprint("sem_acquire ", n), -n)
}

func (f *fakeStore) SemaphoreAdd(_ context.Context, op redisio.Op, _ string, n int) redisio.Reply {
	return f.latched(op, fmt.Sprint("sem_add ", n), n)
}

func (f *fakeStore) SemaphoreSet(_ context.Context, op redisio.Op, _ string, n int) redisio.Reply {
	return f.latched(op, fmt.Sprint("sem_set ", n), 0)
}

func (f *fakeStore) PermitAcquire(_ context.Context, op redisio.Op, _, member string, _ time.Duration) redisio.Reply {
	return f.latched(op, "permit_acquire "+permitLabel(member), 0)
}

func (f *fakeStore) PermitAdd(_ context.Context, op redisio.Op, _ string, n int) redisio.Reply {
	return f.latched(op, fmt.Sprint("permit_add ", n), n)
}

func (f *fakeStore) PermitRelease(_ context.Context, op redisio.Op, _, member string) redisio.Reply {
	return f.latched(op, "permit_release "+permitLabel(member), 0)
}

// permitLabel names a permit in a call: the hex digit its id repeats (the
// rows' ids, see permitID), else the whole id in hex.
func permitLabel(member string) string {
	h := hex.EncodeToString([]byte(member))
	if strings.Count(h, h[:1]) == len(h) {
		return h[:1]
	}
	return h
}

func (f *fakeStore) CountDownSet(_ context.Context, op redisio.Op, _ string, n int64) redisio.Reply {
	return f.latched(op, fmt.Sprint("cdl_set ", n), 0)
}

func (f *fakeStore) CountDown(_ context.Context, op redisio.Op, _ string) redisio.Reply {
	return f.latched(op, "cdl_down", 0)
}

func (f *fakeStore) CountDownGetThen(_ context.Context, _ string, then func(int64, error)) {
	f.calls <- &call{what: "cdl_get", count: then}
}

// ResolveThen hands the test the settlement of the call whose reply was
// lost; its name is "resolve " and that call's.
func (f *fakeStore) ResolveThen(_ context.Context, op redisio.Op, then func(redisio.Settlement, redisio.Reply, error)) {
	f.mu.Lock()
	of := f.byLatch[op.Seq]
	f.mu.Unlock()
	what := "resolve ?"
	if of != nil {
		what = "resolve " + of.what
	}
	f.calls <- &call{what: what, op: op, settled: then, of: of}
}

func (f *fakeStore) ForgetLatch(string, uint64) { f.calls <- &call{what: "forget"} }

// ForgetAtClose is called as the runtime closes, after the rows' checks.
func (f *fakeStore) ForgetAtClose(string, uint64) {}

func (f *fakeStore) SubscribersThen(_ context.Context, _ string, then func(redisio.Listeners, error)) {
	if f.autoCount {
		then(redisio.Listeners{All: 2, Ours: 2}, nil)
		return
	}
	f.calls <- &call{what: "subscribers", listen: then}
}

func (f *fakeStore) Close(time.Time) bool { return true }

// ranNow marks c as run in Redis: a semaphore's count moves by its permits
// (an acquire only when it granted), a permit semaphore's by one permit
// taken or given back.
func (f *fakeStore) ranNow(c *call, r redisio.Reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.ran {
		return
	}
	c.ran = true
	switch {
	case strings.HasPrefix(c.what, "permit_acquire "):
		if ok, _, err := r.Permit(); ok && err == nil {
			f.permits--
		}
	case strings.HasPrefix(c.what, "permit_release "):
		if n, err := r.Int(); n == 1 && err == nil {
			f.permits++
		}
	default:
		if n, err := r.Int(); c.n > 0 || (c.n < 0 && err == nil && n == 1) {
			f.permits += c.n
		}
	}
}

// count is the semaphore's count in Redis.
func (f *fakeStore) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.permits
}

// The replies the scripts give, as go-redis returns them.
var (
	granted    = redisio.Reply{Err: redis.Nil} // lock.lua, fair_lock.lua: nil
	released   = redisio.Reply{Val: int64(1)}
	stillHeld  = redisio.Reply{Val: int64(0)} // unlock.lua: one of several holds released
	handedOver = redisio.Reply{Val: int64(3)}
	// unlock.lua: deleted, nothing published (none asked, or refused)
	releasedQuiet = redisio.Reply{Val: int64(4)}
	semOK         = redisio.Reply{Val: int64(1)} // semaphore_acquire.lua granted; semaphore_release.lua done
	semNo         = redisio.Reply{Val: int64(0)}
)

// refused is an acquire refused while the holder keeps the lock for ttl.
func refused(ttl time.Duration) redisio.Reply { return redisio.Reply{Val: ttl.Milliseconds()} }

// unsynced is r as it comes back when too few replicas confirmed it.
func unsynced(r redisio.Reply) redisio.Reply { r.Unsynced = true; return r }

// errLost is a reply lost in transit (a reset connection, a pool timeout):
// the request may have run (redisio.Unknown).
var errLost = fmt.Errorf("read tcp 127.0.0.1:6379: connection reset by peer")

// serverError is an error reply from Redis: the request did not run.
type serverError string

func (e serverError) Error() string { return string(e) }

// RedisError marks it as Redis's own (go-redis's redis.Error).
func (serverError) RedisError() {}

const errBusy = serverError("BUSY Redis is busy running a script")

// errWrongType is Redis refusing a script for good: the name holds another
// kind's data.
const errWrongType = serverError("WRONGTYPE Operation against a key holding the wrong kind of value script: 1f0c, on @user_script:9.")

// fakeChannels stands in for redisio.PubSub: it keeps the handlers, and
// delivers only the events a test publishes; barriers pass when the test
// says (pong).
type fakeChannels struct {
	mu       sync.Mutex
	nextID   uint64
	subs     map[string]map[uint64]redisio.Handler
	barriers map[string][]func()
	log      []string
}

func newFakeChannels() *fakeChannels {
	return &fakeChannels{subs: make(map[string]map[uint64]redisio.Handler)}
}

func (p *fakeChannels) Subscribe(_ context.Context, channel string, h redisio.Handler) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nextID++
	if p.subs[channel] == nil {
		p.subs[channel] = make(map[uint64]redisio.Handler)
	}
	p.subs[channel][p.nextID] = h
	p.log = append(p.log, "subscribe "+channel)
	return p.nextID, nil
}

func (p *fakeChannels) Unsubscribe(_ context.Context, channel string, id uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.subs[channel], id)
	if len(p.subs[channel]) == 0 {
		delete(p.subs, channel)
	}
	p.log = append(p.log, "unsubscribe "+channel)
	return nil
}

func (p *fakeChannels) Requeue(_ context.Context, channel string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, "requeue "+channel)
	return nil
}

func (p *fakeChannels) Close(time.Time) bool { return true }

// Barrier keeps then until the test's pong on channel; ErrNoBarrier when
// nobody listens there.
func (p *fakeChannels) Barrier(_ context.Context, channel string, then func()) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.subs[channel]) == 0 {
		return redisio.ErrNoBarrier
	}
	if p.barriers == nil {
		p.barriers = make(map[string][]func())
	}
	p.barriers[channel] = append(p.barriers[channel], then)
	return nil
}

// pong passes the oldest barrier on channel; false if none is pending.
func (p *fakeChannels) pong(channel string) bool {
	p.mu.Lock()
	bs := p.barriers[channel]
	if len(bs) == 0 {
		p.mu.Unlock()
		return false
	}
	p.barriers[channel] = bs[1:]
	p.mu.Unlock()
	bs[0]()
	return true
}

// publish delivers ev on channel to every handler; false if nobody
// listens.
func (p *fakeChannels) publish(channel string, ev redisio.Event) bool {
	p.mu.Lock()
	hs := make([]redisio.Handler, 0, len(p.subs[channel]))
	for _, h := range p.subs[channel] {
		hs = append(hs, h)
	}
	p.mu.Unlock()
	ev.Channel = channel
	for _, h := range hs {
		h(ev)
	}
	return len(hs) > 0
}

// listening reports whether anyone is subscribed to channel.
func (p *fakeChannels) listening(channel string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.subs[channel]) > 0
}
