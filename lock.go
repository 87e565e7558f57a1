package lockactor

import (
	"context"
	"sync"
	"time"

	"github.com/lockactor/lockactor/actors"
	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// Locker is implemented by *Lock, *MultiLock and *RedLock.
type Locker interface {
	Lock(ctx context.Context, opts ...LockOption) error
	TryLock(ctx context.Context, opts ...LockOption) (bool, error)
	Unlock(ctx context.Context) error
}

var _ Locker = (*Lock)(nil)

// A Lock handle is one owner. Reentrancy is per handle: the same handle may
// lock again and must unlock as many times. Two handles for the same name
// (from one Client or several) exclude each other. A handle is safe for
// concurrent use, but concurrent goroutines sharing one handle share one
// ownership, exactly like Java threads sharing a thread id would; give each
// goroutine its own handle for mutual exclusion.
type Lock struct {
	c     *Client
	name  string
	key   actors.Key
	owner string        // "<clientUUID>:<handleID>", the hash field in Redis
	mode  messages.Mode // which view of a ReadWriteLock; Exclusive otherwise

	mu    sync.Mutex
	lost  chan struct{}
	token uint64    // fencing token of the current hold; 0 when not held
	since time.Time // when the current hold was granted from zero holds (lockactor.hold.duration)
}

// Name is the lock's name, the Redis key of its hash.
func (l *Lock) Name() string { return l.name }

// Lock waits until the lock is acquired or ctx is done (WithWait is ignored);
// then it returns an error that matches ctx.Err() and holds nothing (a grant
// that raced with the cancellation is given back). Close makes it return
// ErrClosed. A Redis error is returned wrapped; it never means "not
// acquired".
func (l *Lock) Lock(ctx context.Context, opts ...LockOption) error {
	o, err := l.begin(ctx, opts)
	if err != nil {
		return err
	}
	o.wait = 0 // Lock ignores WithWait: a FairLock would queue with it as its timeout
	_, err = l.acquire(ctx, o, false, nil)
	return err
}

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
func (l *Lock) check(ctx context.Context) error {
	switch {
	case ctx == nil:
		return l.what().invalid(l.name, "nil context")
	case l.name == "":
		return l.what().invalid(l.name, "empty lock name")
	case l.c.cluster && !slotSafe(l.name):
		return l.what().invalid(l.name, slotProblem)
	case l.c.closed():
		return l.what().closed(l.name)
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
	m := &messages.Acquire{Owner: l.owner, Mode: l.mode, Lease: o.lease, Wait: o.wait, TryOnly: tryOnly, Req: messages.NewRequest()}
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
		l.mu.Lock()
		if res.Lost != l.lost { // a fresh Lost channel: a hold from zero
			l.since = time.Now()
		}
		l.lost, l.token = res.Lost, res.Token
		l.mu.Unlock()
		return true, nil
	}
	return false, nil
}

// Unlock releases one hold. ErrNotHeld if this handle does not hold the lock
// (never held, already fully released, or the lease expired and someone else
// may hold it).
//
// The hold is given up when Unlock is called, whatever follows: the watchdog
// stops renewing it at once. If Unlock returns any other error (Redis did not
// confirm, or ctx ended first), the runtime keeps telling Redis in the
// background until Redis confirms or the hold's lease has run out, and
// Redis applies the release at most once; Lost closes if the hold turns out
// to have been lost meanwhile. Do not call Unlock again for that hold.
// Unlock does not wait for an outage to end: when a retry fails too, it
// returns Redis's error while the release goes on. While a release is owed,
// this handle's next Lock or TryLock waits for it (a release that reached
// Redis after a newer grant to the same handle would free that grant).
func (l *Lock) Unlock(ctx context.Context) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	called := time.Now()
	send := func(msg any) error { return l.c.rt.Send(l.key, msg) }
	res, err := awaitRelease(ctx, send, l.c.done, &messages.Release{Owner: l.owner, Mode: l.mode})
	switch {
	case err != nil:
		return l.what().err(l.name, err)
	case res.Err != nil:
		return l.what().err(l.name, res.Err)
	case res.NotHeld:
		return l.what().err(l.name, ErrNotHeld)
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

// Extend gives a WithLease hold `lease` more from now (the key's TTL becomes
// lease): ErrNotHeld if this handle does not hold the lock (never held,
// released, or expired); ErrInvalidArgument for lease <= 0 or on a
// watchdog-renewed hold.
//
// It works for every kind of Lock: a plain Lock, a FairLock, a FencedLock
// (the token stays the same) and either view of a ReadWriteLock, whose key
// keeps the longest lease any of its holds needs (its TTL becomes at least
// lease). The lease counts in whole milliseconds, rounded up, as
// WithLease's does. A reentrant hold is extended as a whole, and a later WithLease
// acquisition by the same handle sets its lease again. A hold found gone in
// Redis closes Lost, and so does a reply that comes back after the new
// lease, counted from when it was sent, could have run out: that Extend
// returns ErrNotHeld, since the caller would get none of the lease. A Redis
// error, or (with WithReplicaSync) a renewal too few replicas confirmed
// (ErrNotReplicated), is returned wrapped and leaves the hold's lease as the
// runtime counts it as it was; if ctx ends first, the lease may or may not
// have been extended. On a member of a MultiLock or RedLock it extends that
// member alone (a RedLock re-applies its own lease to its members).
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
	res, err := awaitReply(ctx, send, l.c.done, m, m.Reply)
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

// Lost is closed when this handle held the lock and the runtime found it gone
// before Unlock (the watchdog found the key missing or owned by someone else,
// or could not renew before the lease ran out). It is replaced by a fresh
// channel on each new acquisition from zero holds.
func (l *Lock) Lost() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == nil {
		l.lost = make(chan struct{})
	}
	return l.lost
}

// Token is the fencing token of the current hold of a FencedLock, the same
// for every reentrant hold of one acquisition. 0 for other kinds, when not
// held, or once Lost has closed.
//
// Within one Client, a name's tokens strictly increase: a hold from zero,
// through any handle of the Client, gets a token above every token the
// Client has seen for that name, also after the counter in Redis went back
// (a Sentinel or Cluster failover that lost acknowledged writes, a restart
// without persistence, a DEL of the counter), and the counter is raised
// past it. Across Clients, tokens strictly increase as long as the counter
// never goes back. After it did, a Client that never saw the higher tokens
// can be issued a token lower than, or equal to, one another Client got
// before; so the resource must still check every write's token against
// the highest it has accepted, and it cannot tell apart two holders that
// carry the same token. See docs/PROTOCOL.md, section 3.
func (l *Lock) Token() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		select {
		case <-l.lost:
			return 0
		default:
		}
	}
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
	})
}
