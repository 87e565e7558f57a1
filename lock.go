package lockactor

import (
	"context"
	"sync"
	"time"

	"github.com/lockactor/lockactor/actors"
	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// Locker is implemented by *Lock, *Mutex, *MultiLock and *RedLock.
type Locker interface {
	Lock(ctx context.Context, opts ...LockOption) error
	TryLock(ctx context.Context, opts ...LockOption) (bool, error)
	Unlock(ctx context.Context) error
	// Lost is closed when the current hold ends before its Unlock (see
	// Lock.Lost); a MultiLock's closes when any member's does, a RedLock's
	// when fewer than a majority still hold or its validity is spent.
	Lost() <-chan struct{}
}

var _ Locker = (*Lock)(nil)

// A Lock handle is one owner, as a Java thread is in Redisson. Reentrancy
// is per handle: the same handle may lock again and must unlock as many
// times. Two handles for the same name (from one Client or several)
// exclude each other. A handle is safe for concurrent use, but goroutines
// sharing one handle share one ownership and do not exclude each other:
// give each goroutine its own handle, or share a Mutex, which is made for
// that.
type Lock struct {
	c     *Client
	name  string
	key   actors.Key
	owner string        // "<clientUUID>:<handleID>", the hash field in Redis
	mode  messages.Mode // which view of a ReadWriteLock; Exclusive otherwise
	mutex bool          // a Mutex's handle: errors and metrics say "mutex" (see what)

	box   lostBox // what Lost returns
	mu    sync.Mutex
	holds int    // grants not yet given up by an Unlock (reentrant holds count each)
	token uint64 // fencing token of the current hold; 0 when not held
	// relayed is the owner whose hash field Redis keeps the current hold
	// under when another local owner passed its hold on to this one
	// without a word to Redis; empty: this handle's own (owner).
	relayed string
	since   time.Time // when the current hold was granted from zero holds (lockactor.hold.duration)
}

// Name is the lock's name, the Redis key of its hash.
func (l *Lock) Name() string { return l.name }

// Lock waits until the lock is acquired or ctx is done; then it returns an
// error that matches ctx.Err() and holds nothing (a grant that raced with
// the cancellation is given back). Close makes it return ErrClosed. A
// Redis error is returned wrapped; it never means "not acquired". WithWait
// is ErrInvalidArgument: bound the wait with ctx, or use TryLock.
func (l *Lock) Lock(ctx context.Context, opts ...LockOption) error {
	o, err := l.begin(ctx, opts)
	if err != nil {
		return err
	}
	if o.wait != 0 {
		return l.what().invalid(l.name, waitOnLock)
	}
	_, err = l.acquire(ctx, o, false, nil)
	return err
}

// waitOnLock is the ErrInvalidArgument text for WithWait given to Lock.
const waitOnLock = "WithWait is for TryLock; Lock waits until it holds or its ctx ends"

// TryLock makes one attempt, or with WithWait waits up to that long; (false,
// nil) when the lock was not acquired. If ctx ends first the error matches
// ctx.Err() and nothing is held. With replica sync on (WithReplicaSync), a
// single attempt whose grant too few replicas confirmed returns an error
// matching ErrNotReplicated (the grant was undone); with WithWait such
// attempts are retried until the wait ends. A single attempt does not wait
// for an outage to end either: while Redis cannot say whether an earlier
// request of this name's ran, it returns Redis's error.
func (l *Lock) TryLock(ctx context.Context, opts ...LockOption) (bool, error) {
	o, err := l.begin(ctx, opts)
	if err != nil {
		return false, err
	}
	if o.wait == 0 {
		return l.acquire(ctx, o, true, nil)
	}
	t := time.NewTimer(o.wait)
	defer t.Stop()
	return l.acquire(ctx, o, false, t.C)
}

// begin validates a call before anything is sent.
func (l *Lock) begin(ctx context.Context, opts []LockOption) (lockOptions, error) {
	if err := l.check(ctx); err != nil {
		return lockOptions{}, err
	}
	return lockOptionsOf(l.what(), l.name, opts)
}

// check rejects calls that must not reach Redis: nil ctx, empty name, closed
// Client.
func (l *Lock) check(ctx context.Context) error { return checkLock(ctx, l.c, l.what(), l.name) }

// checkLock rejects a call on the lock name of c that must not reach
// Redis.
func checkLock(ctx context.Context, c *Client, k kind, name string) error {
	switch {
	case ctx == nil:
		return k.invalid(name, "nil context")
	case name == "":
		return k.invalid(name, "empty lock name")
	case c.cluster && !slotSafe(name):
		return k.invalid(name, slotProblem)
	case c.closed():
		return k.closed(name)
	}
	return nil
}

// acquire asks the lock's actor for one hold and waits for its answer, ctx,
// the wait bound (expired) or Close, and records the call in the metrics.
// A grant that raced a cancelled ctx is given back; one that raced the wait
// bound is kept.
func (l *Lock) acquire(ctx context.Context, o lockOptions, tryOnly bool, expired <-chan time.Time) (bool, error) {
	start := time.Now()
	ok, err := l.ask(ctx, o, tryOnly, expired)
	l.c.metrics.acquisition(ctx, l.what(), l.name, start, ok, err)
	return ok, err
}

// ask is acquire without the metrics.
func (l *Lock) ask(ctx context.Context, o lockOptions, tryOnly bool, expired <-chan time.Time) (bool, error) {
	m := &messages.Acquire{Owner: l.owner, Mode: l.mode, Lease: o.lease, Wait: o.wait, TryOnly: tryOnly, Req: messages.NewRequest(),
		Lost: l.box.forNext()}
	res, err := l.c.await(ctx, l.key, m, expired, func() {
		_ = l.c.rt.Send(l.key, &messages.Release{Owner: l.owner, Mode: l.mode})
	})
	switch {
	case err != nil:
		return false, l.what().err(l.name, err)
	case res.Err != nil:
		return false, l.what().err(l.name, res.Err)
	case res.Upgrade:
		return false, l.what().invalid(l.name, "read-to-write upgrade: this owner holds read holds, and the write lock would wait for itself")
	case res.Granted:
		l.granted(res.Lost, res.Token, res.Field)
		return true, nil
	}
	return false, nil
}

// granted records a grant to this handle (its own, or a group's); field
// is the owner Redis keeps it under, if not this handle's.
func (l *Lock) granted(lost chan struct{}, token uint64, field string) {
	fresh := l.box.held(lost)
	l.mu.Lock()
	defer l.mu.Unlock()
	if fresh {
		l.since, l.holds = time.Now(), 0
	}
	l.holds++
	l.token, l.relayed = token, field
}

// givingUp records an Unlock that goes to the actor: false when the handle
// holds nothing to give up (nothing is sent then).
func (l *Lock) givingUp() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holds == 0 {
		return false
	}
	l.holds--
	if l.holds == 0 {
		l.box.free()
		l.relayed = ""
	}
	return true
}

// heldNothing records that Redis holds nothing for this handle.
func (l *Lock) heldNothing() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holds, l.relayed = 0, ""
	l.box.free()
}

// Unlock releases one hold; the watchdog stops renewing it at once. It
// returns ErrNotHeld if this handle holds nothing (never held, already fully
// released, or the lease expired and someone else may hold it: once Lost
// has closed, Unlock says so even if Redis still had the hold), and an
// error matching ErrReleasePending (and ctx's error, or wrapping Redis's)
// when ctx ended, or Redis failed twice, before Redis confirmed: the
// runtime then goes on releasing in the background until Redis confirms or
// the lease has run out, at most once, and this handle's next Lock or
// TryLock waits for it. Do not call Unlock again for that hold.
//
// Note: a release Redis refuses for good (the name holds another kind's
// data) returns Redis's error alone, and is not retried.
func (l *Lock) Unlock(ctx context.Context) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	if !l.givingUp() {
		return l.what().err(l.name, ErrNotHeld)
	}
	called := time.Now()
	send := func(msg any) error { return l.c.rt.Send(l.key, msg) }
	res, err := l.c.release(ctx, send, &messages.Release{Owner: l.owner, Mode: l.mode})
	if err := releaseErr(l.what(), l.name, res, err); err != nil {
		if res.NotHeld {
			l.heldNothing()
		}
		return err
	}
	if res.Gone {
		l.mu.Lock()
		since := l.since
		l.token, l.since = 0, time.Time{}
		l.mu.Unlock()
		l.c.metrics.held(ctx, l.what(), l.name, since, called)
	}
	return nil
}

// Extend sets a WithLease hold's lease to lease from now (in whole
// milliseconds, rounded up). It returns ErrNotHeld when this handle holds
// nothing (never held, released, expired, found gone, or the reply came
// back after the new lease could have run out, which closes Lost too),
// ErrInvalidArgument for lease <= 0 or a watchdog-renewed hold, and with
// WithReplicaSync ErrNotReplicated when too few replicas confirmed. On an
// error the lease stays as the runtime counted it; if ctx ends first, it
// may or may not have been extended.
//
// Note: a reentrant hold is extended as a whole, a FencedLock keeps its
// token, a ReadWriteLock's key keeps the longest lease its holds need, and
// a member of a MultiLock or RedLock is extended alone.
func (l *Lock) Extend(ctx context.Context, lease time.Duration) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	if err := checkLease(l.what(), l.name, lease); err != nil {
		return err
	}
	lease = redisio.WholeMS(lease)
	m := &messages.Extend{Owner: l.owner, Mode: l.mode, Lease: lease, Handle: true, Reply: make(chan messages.ExtendResult, 1)}
	send := func(msg any) error { return l.c.rt.Send(l.key, msg) }
	start := time.Now()
	res, err := awaitReply(ctx, send, l.c.done, m, m.Reply)
	err = l.c.named(ctx, start, err)
	switch {
	case err != nil:
		return l.what().err(l.name, err)
	case res.Err != nil:
		return l.what().err(l.name, res.Err)
	case res.Watchdog:
		return l.what().invalid(l.name, "extend of a watchdog-renewed hold (Extend is for holds taken WithLease)")
	case !res.OK:
		return l.what().err(l.name, ErrNotHeld)
	}
	return nil
}

// what is the handle's kind, in its errors and metrics.
func (l *Lock) what() kind {
	if l.mutex {
		return kindMutex
	}
	switch l.key.Kind {
	case actors.KindFair:
		return kindFair
	case actors.KindFenced:
		return kindFenced
	case actors.KindSpin:
		return kindSpin
	case actors.KindRW:
		if l.mode == messages.Write {
			return kindWrite
		}
		return kindRead
	}
	return kindLock
}

// Lost is closed when this handle held the lock and the hold ended before
// Unlock: the runtime found it gone (the key missing or owned by someone
// else, or no renewal confirmed before the lease ran out), or a WithLease
// hold's lease ran out (counted from when its grant was sent, as Redis
// counted it no sooner; so a lease that runs out while its Unlock is on
// the way may close it, though Redis still had the hold for the Unlock to
// release). It is replaced by a fresh channel on each new
// acquisition from zero holds; a channel taken while the handle holds
// nothing (before Lock, or after Unlock) is the one its next hold will
// close.
func (l *Lock) Lost() <-chan struct{} { return l.box.get() }

// Token is the fencing token of a FencedLock's current hold, the same for
// every reentrant hold of one acquisition; 0 for other kinds, when not
// held, or once Lost has closed. Within one Client a name's tokens
// strictly increase, also after the counter in Redis went back; across
// Clients, as long as it never does.
//
// Note: a failover that lost writes, a restart without persistence or a
// DEL of the counter can put it back, and a Client that never saw the
// higher tokens may then be issued one again: the resource must still
// check every write's token against the highest it accepted
// (docs/PROTOCOL.md, section 3).
func (l *Lock) Token() uint64 {
	cur := l.box.current()
	if cur == nil {
		return 0
	}
	select {
	case <-cur:
		return 0
	default:
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.token
}

// ForceUnlock deletes the lock whoever holds it and wakes its waiters; true if
// it was locked. For a ReadWriteLock view it deletes the lock only while it is
// held in that view's mode. The holder finds out at its next renewal (Lost
// closes). If ctx ends first, the lock may or may not have been deleted. A
// SpinLock of a Client given WithSpinPublish(false) tells no waiter: Lock
// waiters of the name take the lock at their next retry.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	return query(ctx, l, func(ctx context.Context, io *redisio.Conn) (bool, error) {
		// No local hold of the name passes from owner to owner without
		// Redis while this runs (the release message may come late).
		done := l.c.rt.Forcing(l.name)
		ok, err := l.forceUnlock(ctx, io)
		done(err)
		return ok, err
	})
}

// forceUnlock sends the force unlock script of the handle's kind.
func (l *Lock) forceUnlock(ctx context.Context, io *redisio.Conn) (bool, error) {
	switch l.key.Kind {
	case actors.KindFair:
		return io.FairForceUnlock(ctx, l.name, time.Now())
	case actors.KindRW:
		return io.RWForceUnlock(ctx, l.name, l.rwMode())
	case actors.KindSpin:
		if l.c.opts.spinQuiet {
			return io.ForceUnlockQuiet(ctx, l.name)
		}
	}
	return io.ForceUnlock(ctx, l.name)
}
