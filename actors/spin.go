package actors

import (
	"math/rand/v2"
	"time"
)

// The spin lock (Client.SpinLock, Redisson's RedissonSpinLock) is a lock
// actor with the reentrant scheme (the same hash, scripts and owner fields
// as Lock) and a spinner. It differs from Lock in one thing: it never
// subscribes to the lock's channel, so nothing tells its waiters that a
// holder in another process has released. Instead, after each refusal the
// queue's next attempt waits one step of an exponential backoff with
// jitter, capped (Config.SpinMin and SpinMax), rather than the holder's
// whole lease.
//
// What stays as in Lock, and why:
//   - One attempt at a time serves the whole local queue: a thousand local
//     waiters spin as one, not a thousand.
//   - A release with local waiters still hands the lock to the next one in
//     the same script (handoff.lua). No subscription is needed for that
//     (the actor knows its own waiters), and it is what keeps a busy Client
//     at one script per acquisition. As other processes' spinners listen on
//     no channel, nobody can be counted: every run of HandoffRun hand-offs
//     ends with a plain release, and the local waiters then hold back for
//     the backoff cap, long enough for a spinner elsewhere (which sleeps at
//     most its cap between tries) to take its turn.
//   - The release script still publishes on the lock's channel, so Lock
//     waiters (ours or Redisson's) of the same name wake at once, unless
//     the Client was told not to (Config.SpinQuiet, WithSpinPublish(false)):
//     then, as in Redisson's spin lock, nothing is published, and those
//     waiters take the lock at their next retry, within the holder's
//     lease. A server that refuses the publish (an ACL) does not fail the
//     release either way: unlock.lua calls it with redis.pcall, after the
//     DEL, and reports the release as ReleasedQuiet.
//   - While a local owner holds, waiters do not spin: its release or loss
//     wakes them, as in Lock.
type spinner struct {
	lo, hi time.Duration
	b      backoff
	quiet  bool // releases publish nothing (Config.SpinQuiet)
}

// Default backoff bounds of a spin lock's waiters: Redisson's
// ExponentialBackOff defaults (1 ms doubling up to 128 ms).
const (
	DefaultSpinMin = time.Millisecond
	DefaultSpinMax = 128 * time.Millisecond
)

func newSpinner(lo, hi time.Duration) *spinner { return &spinner{lo: lo, hi: hi} }

// next is the wait before the next try: the backoff's step d (doubling from
// lo to hi) jittered uniformly into [d/2, d], so that waiters of many
// Clients refused at the same moment do not retry in step.
func (s *spinner) next() time.Duration {
	d := s.b.next(s.lo, s.hi)
	half := d / 2
	return half + rand.N(d-half+1)
}

// retryIn is how long the queue waits after a refusal that gave the
// holder's remaining lease ttl: at most one backoff step. While a local
// owner holds (ours: how long our holds can still last), its release or
// loss wakes the queue, so it waits out ttl, but no longer than ours: the
// ttl may be another owner's (a spin lock does not hear a ForceUnlock of
// our hold, after which someone else may hold for a whole lease). A nil
// spinner (a lock that subscribes) waits out ttl.
func (s *spinner) retryIn(ttl, ours time.Duration) time.Duration {
	switch {
	case s == nil:
		return ttl
	case ours > 0:
		return min(ttl, ours)
	}
	return min(ttl, s.next())
}

// pause is how long local waiters hold back after a run of hand-offs ends
// with a plain release: the cap (see spinner). Zero for a lock that
// subscribes (its own release message wakes them).
func (s *spinner) pause() time.Duration {
	if s == nil {
		return 0
	}
	return s.hi
}

// publishes reports whether a release of the lock publishes on its
// channel: always for a lock that subscribes (a nil spinner), and for a
// spin lock unless its Client is quiet.
func (s *spinner) publishes() bool { return s == nil || !s.quiet }

// reset starts the backoff over, for the next waiter (after a grant, or when
// nobody waits any more).
func (s *spinner) reset() {
	if s != nil {
		s.b.reset()
	}
}
