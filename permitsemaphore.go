package lockactor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"math"
	"time"

	"github.com/lockactor/lockactor/actors"
	"github.com/lockactor/lockactor/messages"
	"github.com/lockactor/lockactor/redisio"
)

// PermitSemaphore is Redisson's RPermitExpirableSemaphore: every acquired permit has an
// id and a lease, and Redis takes the permit back when the lease ends, whether
// or not its holder is still alive. The permits of a process that dies
// holding them so come back after at most their lease, where a Semaphore's
// would be lost for good. There is no watchdog: choose a lease longer than
// the work, or extend it with UpdateLease.
//
// The key holds the number of available permits, as a Semaphore's does
// (TrySetPermits and AddPermits behave the same); the sorted set
// {name}:timeout holds the id of each held permit scored by its deadline, on
// the Redis server's clock. Every script first gives back the permits whose
// deadlines have passed. Releases are announced on redisson_sc:{name}; an
// expired permit announces nothing until some script finds it, so waiters
// also try again when the earliest lease ends (and at least once a second).
//
// Ids are 32 hex digits, chosen by the caller's process, so a Java Redisson
// client can release a permit taken here and the other way round.
type PermitSemaphore struct {
	c    *Client
	name string
	key  actors.Key
}

// PermitSemaphore returns a handle on the permit semaphore name. An empty
// name surfaces as ErrInvalidArgument from the handle's first call.
func (c *Client) PermitSemaphore(name string) *PermitSemaphore {
	return &PermitSemaphore{c: c, name: name, key: actors.Key{Kind: actors.KindPermit, Name: name}}
}

// Name is the semaphore's name, the Redis key of its count.
func (s *PermitSemaphore) Name() string { return s.name }

// check rejects calls that must not reach Redis: a Semaphore's checks, and
// a lease checkLease refuses.
func (s *PermitSemaphore) check(ctx context.Context, n, minN int, lease time.Duration) error {
	if err := checkLease(kindPermit, s.name, lease); err != nil {
		return err
	}
	return checkPermits(ctx, s.c, kindPermit, s.name, n, minN)
}

// noLease stands for the lease of a call that takes none.
const noLease = time.Duration(math.MaxInt64)

// checkID is check for a call naming a permit; it returns the permit's
// member in the deadlines' sorted set.
func (s *PermitSemaphore) checkID(ctx context.Context, id string, lease time.Duration) (string, error) {
	if err := s.check(ctx, 0, 0, lease); err != nil {
		return "", err
	}
	member, err := redisio.PermitMember(id)
	if err != nil {
		return "", kindPermit.invalid(s.name, err.Error())
	}
	return member, nil
}

// TrySetPermits sets the number of permits to n (> 0) only if it has never
// been set; true if it was set. If it returns an error, the permits were not
// set, unless Redis could not be reached to confirm (the error then says the
// outcome is unknown); if ctx ends first, the change may still be made.
func (s *PermitSemaphore) TrySetPermits(ctx context.Context, n int) (bool, error) {
	if err := s.check(ctx, n, 1, noLease); err != nil {
		return false, err
	}
	res, err := sendAdjust(ctx, s.c, s.key, kindPermit, s.name, &messages.Adjust{N: n, SetOnly: true})
	return res.Set, err
}

// AddPermits adds n permits; n < 0 removes them (the count may go below
// zero, and acquirers then wait until enough are released or expire). The
// change is applied at most once, also when a connection breaks mid-call; an
// error means it was not applied, unless Redis could not be reached to
// confirm (the error then says the outcome is unknown). If ctx ends first,
// the change may still be made.
func (s *PermitSemaphore) AddPermits(ctx context.Context, n int) error {
	if err := s.check(ctx, n, math.MinInt, noLease); err != nil {
		return err
	}
	_, err := sendAdjust(ctx, s.c, s.key, kindPermit, s.name, &messages.Adjust{N: n})
	return err
}

// AvailablePermits is the number of permits available now, after the
// permits whose leases have ended are given back (0 when unset).
func (s *PermitSemaphore) AvailablePermits(ctx context.Context) (int, error) {
	if err := s.check(ctx, 0, 0, noLease); err != nil {
		return 0, err
	}
	return guarded(ctx, s.c, kindPermit, s.name, func(ctx context.Context, io *redisio.Conn) (int, error) {
		return io.PermitAvailable(ctx, s.name)
	})
}

// Acquire takes one permit for lease (> 0, in whole milliseconds, rounded
// up), waiting until one is available or ctx ends, and returns its id. The
// lease counts from when the request is sent: a permit whose grant comes
// back after its lease ran out is given back and asked for again, so a
// lease shorter than a round trip to Redis can never be granted. When ctx ends first, the error matches
// ctx.Err() and no permit is held (one taken as ctx ended is given back).
func (s *PermitSemaphore) Acquire(ctx context.Context, lease time.Duration) (string, error) {
	id, _, err := s.acquire(ctx, lease, false, nil)
	return id, err
}

// TryAcquire takes one permit for lease (> 0, as Acquire's) if one is
// available within wait (0: one attempt) and returns its id; ("", false,
// nil) when none was (a single attempt whose grant came back after its
// lease counts as none).
// With replica sync on, a single attempt whose permit too few replicas
// confirmed gives it back and returns an error matching ErrNotReplicated;
// with a wait it tries again.
func (s *PermitSemaphore) TryAcquire(ctx context.Context, lease, wait time.Duration) (string, bool, error) {
	if wait < 0 {
		return "", false, kindPermit.invalid(s.name, "negative wait")
	}
	if wait == 0 {
		return s.acquire(ctx, lease, true, nil)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	return s.acquire(ctx, lease, false, t.C)
}

// acquire takes a permit under a new id, and records the call in the
// metrics (a call refused by check is not recorded).
func (s *PermitSemaphore) acquire(ctx context.Context, lease time.Duration, tryOnly bool, expired <-chan time.Time) (string, bool, error) {
	if err := s.check(ctx, 1, 1, lease); err != nil {
		return "", false, err
	}
	lease = redisio.WholeMS(lease)
	start := time.Now()
	id := newPermitID()
	m := &messages.Acquire{Owner: id, Permits: 1, Lease: lease, TryOnly: tryOnly, Req: messages.NewRequest()}
	res, err := s.c.await(ctx, s.key, m, expired, func() {
		// Taken as ctx ended: the actor gives it back.
		_ = s.c.rt.Send(s.key, &messages.Release{Owner: id})
	})
	switch {
	case err != nil:
		err = kindPermit.err(s.name, err)
	case res.Err != nil:
		err = kindPermit.err(s.name, res.Err)
	}
	ok := err == nil && res.Granted
	s.c.metrics.acquisition(ctx, kindPermit, s.name, start, ok, err)
	if !ok {
		return "", false, err
	}
	return id, true, nil
}

// Release gives back the permit id and wakes waiters on every client.
// ErrNotHeld when the permit is not held: never acquired, released already,
// or its lease had ended (it then came back to the pool by itself). If
// Redis does not confirm (or ctx ends first), Release returns an error
// matching ErrReleasePending and the runtime keeps giving the permit back in
// the background until Redis confirms or its lease ends, for as long as the
// Client lives; do not release it again.
func (s *PermitSemaphore) Release(ctx context.Context, id string) error {
	if _, err := s.checkID(ctx, id, noLease); err != nil {
		return err
	}
	send := func(msg any) error { return s.c.rt.Send(s.key, msg) }
	res, err := s.c.release(ctx, send, &messages.Release{Owner: id})
	if err == nil && res.NotHeld {
		return kindPermit.err(s.name, notHeld{"permit " + id})
	}
	return releaseErr(kindPermit, s.name, res, err)
}

// UpdateLease gives the held permit id a new lease (> 0, in whole
// milliseconds, rounded up), counted from now (shorter or longer than the
// one it had). ErrNotHeld when the permit is not held (released, or its
// lease had ended), and when Redis's reply came back after the new lease,
// counted from when the call sent it, had run out: the caller would get
// none of it, and the permit may be someone else's by then.
func (s *PermitSemaphore) UpdateLease(ctx context.Context, id string, lease time.Duration) error {
	member, err := s.checkID(ctx, id, lease)
	if err != nil {
		return err
	}
	lease = redisio.WholeMS(lease)
	sent := time.Now()
	ok, err := guarded(ctx, s.c, kindPermit, s.name, func(ctx context.Context, io *redisio.Conn) (bool, error) {
		return io.PermitUpdate(ctx, s.name, member, lease)
	})
	switch {
	case err != nil:
		return err
	case !ok || time.Since(sent) >= lease:
		return kindPermit.err(s.name, notHeld{"permit " + id})
	}
	return nil
}

// newPermitID is a fresh permit id: 16 random bytes in hex, as Redisson's.
func newPermitID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}
