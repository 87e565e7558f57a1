package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	goredispool "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
)

// locker is one owner of one lock name.
type locker interface {
	// Lock waits until the lock is held or ctx is done. A library that gives
	// up on its own (redsync after its tries) returns errGaveUp, and the
	// caller tries again.
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
}

// errGaveUp is a library's own "not acquired" (redsync's ErrFailed,
// redislock's ErrNotObtained) while ctx is still live.
var errGaveUp = errors.New("library gave up")

// lib is one library opened on one go-redis client.
type lib interface {
	// Locker returns a new owner of name.
	Locker(name string) locker
	Close() error
}

// libSpec names a library and opens it on a client.
type libSpec struct {
	Name string
	Open func(rdb *redis.Client) (lib, error)
}

// leaseMS is the lease of the peers and raw (lockactor's watchdog default).
const lease = 30 * time.Second

// tuning holds the knobs of the peers that flags set.
type tuning struct {
	RedsyncTries     int
	RedsyncDelay     time.Duration
	RedislockBackoff time.Duration
}

// allLibs are the libraries in the order they alternate within a round.
func allLibs(t tuning) []libSpec {
	return []libSpec{
		{"raw", func(rdb *redis.Client) (lib, error) { return newRaw(rdb), nil }},
		{"lockactor", func(rdb *redis.Client) (lib, error) { return openLockactor(rdb) }},
		{"lockactor-nosync", func(rdb *redis.Client) (lib, error) {
			return openLockactor(rdb, lockactor.WithReplicaSync(0, time.Second))
		}},
		{"lockactor-norelay", func(rdb *redis.Client) (lib, error) { return openLockactor(rdb, lockactor.WithRelay(false)) }},
		{"redsync-default", func(rdb *redis.Client) (lib, error) { return openRedsync(rdb), nil }},
		{"redsync-tuned", func(rdb *redis.Client) (lib, error) {
			return openRedsync(rdb, redsync.WithTries(t.RedsyncTries), redsync.WithRetryDelay(t.RedsyncDelay)), nil
		}},
		{"redislock", func(rdb *redis.Client) (lib, error) { return openRedislock(rdb, t.RedislockBackoff), nil }},
	}
}

// pickLibs keeps the specs named in csv ("all" or "" keeps all); raw is
// always kept, as every ratio is against it.
func pickLibs(all []libSpec, csv string) ([]libSpec, error) {
	if csv == "" || csv == "all" {
		// lockactor-nosync differs from lockactor only with --replicas,
		// and lockactor-norelay only on one hot key: they run when named.
		var out []libSpec
		for _, s := range all {
			if s.Name != "lockactor-nosync" && s.Name != "lockactor-norelay" {
				out = append(out, s)
			}
		}
		return out, nil
	}
	want := map[string]bool{"raw": true}
	for _, n := range strings.Split(csv, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []libSpec
	for _, s := range all {
		if want[s.Name] {
			out = append(out, s)
			delete(want, s.Name)
		}
	}
	for n := range want {
		if n != "raw" {
			return nil, fmt.Errorf("unknown library %q", n)
		}
	}
	return out, nil
}

func findLib(all []libSpec, name string) (libSpec, error) {
	for _, s := range all {
		if s.Name == name {
			return s, nil
		}
	}
	return libSpec{}, fmt.Errorf("unknown library %q", name)
}

// --- lockactor: one Client per process, one *Lock handle per owner.

type lockactorLib struct{ c *lockactor.Client }

func openLockactor(rdb *redis.Client, opts ...lockactor.Option) (*lockactorLib, error) {
	c, err := lockactor.New(rdb, opts...)
	if err != nil {
		return nil, err
	}
	return &lockactorLib{c: c}, nil
}

func (l *lockactorLib) Locker(name string) locker { return lockactorLocker{l.c.Lock(name)} }
func (l *lockactorLib) Close() error              { return l.c.Close() }

// lockactorLocker adapts *lockactor.Lock (whose Lock takes options).
type lockactorLocker struct{ l *lockactor.Lock }

func (a lockactorLocker) Lock(ctx context.Context) error   { return a.l.Lock(ctx) }
func (a lockactorLocker) Unlock(ctx context.Context) error { return a.l.Unlock(ctx) }

// --- redsync: one Mutex per owner (the Mutex carries the owner's value).

type redsyncLib struct {
	rs   *redsync.Redsync
	opts []redsync.Option
}

func openRedsync(rdb *redis.Client, opts ...redsync.Option) *redsyncLib {
	return &redsyncLib{rs: redsync.New(goredispool.NewPool(rdb)), opts: opts}
}

func (l *redsyncLib) Locker(name string) locker {
	return redsyncLocker{l.rs.NewMutex(name, l.opts...)}
}
func (l *redsyncLib) Close() error { return nil }

type redsyncLocker struct{ m *redsync.Mutex }

func (r redsyncLocker) Lock(ctx context.Context) error {
	err := r.m.LockContext(ctx)
	if errors.Is(err, redsync.ErrFailed) || isTaken(err) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errGaveUp
	}
	return err
}

func isTaken(err error) bool {
	var taken *redsync.ErrTaken
	return errors.As(err, &taken)
}

func (r redsyncLocker) Unlock(ctx context.Context) error {
	_, err := r.m.UnlockContext(ctx)
	return err
}

// --- bsm/redislock: Obtain with a linear backoff; the retry window is ctx's
// deadline (the run's end), so it never gives up while the run lasts.

type redislockLib struct {
	c    *redislock.Client
	opts *redislock.Options
}

func openRedislock(rdb *redis.Client, backoff time.Duration) *redislockLib {
	return &redislockLib{
		c:    redislock.New(rdb),
		opts: &redislock.Options{RetryStrategy: redislock.LinearBackoff(backoff)},
	}
}

func (l *redislockLib) Locker(name string) locker { return &redislockLocker{lib: l, name: name} }
func (l *redislockLib) Close() error              { return nil }

type redislockLocker struct {
	lib  *redislockLib
	name string
	held *redislock.Lock
}

func (r *redislockLocker) Lock(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		// Without a deadline redislock retries only for one lease.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Hour)
		defer cancel()
	}
	l, err := r.lib.c.Obtain(ctx, r.name, lease, r.lib.opts)
	switch {
	case err == nil:
		r.held = l
		return nil
	case errors.Is(err, redislock.ErrNotObtained) && ctx.Err() == nil:
		return errGaveUp
	}
	return err
}

func (r *redislockLocker) Unlock(ctx context.Context) error {
	if r.held == nil {
		return errors.New("redislock: not held")
	}
	l := r.held
	r.held = nil
	return l.Release(ctx)
}
