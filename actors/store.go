package actors

import (
	"context"
	"time"

	"github.com/lockactor/lockactor/redisio"
)

// store is every Redis call a lock actor makes, and no other: the latched
// scripts that change a lock (each takes a redisio.Op and, with Op.Then
// set, answers later), the settlement of a request whose reply was lost,
// renewals and fair-lock cancels, and the subscriber count that bounds a
// run of hand-offs. *redisio.Conn is the runtime's; the state machines'
// unit tests put a fake with scripted replies in its place
// (store_fake_test.go).
type store interface {
	// RedissonLock and the fenced lock (lock.lua, fenced_lock.lua,
	// unlock.lua, handoff.lua, renew.lua). UnlockQuiet is Unlock without
	// the publish (a quiet spin lock); Untold logs, once per Client, that
	// the server refused a release's publish.
	Lock(ctx context.Context, op redisio.Op, name, owner string, lease time.Duration) redisio.Reply
	FencedLock(ctx context.Context, op redisio.Op, name, owner string, lease time.Duration, floor uint64, fresh bool) redisio.Reply
	Unlock(ctx context.Context, op redisio.Op, name, owner string, lease time.Duration) redisio.Reply
	UnlockNoted(ctx context.Context, op redisio.Op, name, owner string, lease time.Duration, note string) redisio.Reply
	UnlockQuiet(ctx context.Context, op redisio.Op, name, owner string, lease time.Duration) redisio.Reply
	Untold(name string)
	Handoff(ctx context.Context, op redisio.Op, name, owner string, lease time.Duration, next string, nextLease time.Duration) redisio.Reply
	Renew(ctx context.Context, name, owner string, lease time.Duration, stale func() bool, then func(bool, error))

	// RedissonReadWriteLock.
	ReadLock(ctx context.Context, op redisio.Op, name, owner string, lease time.Duration) redisio.Reply
	WriteLock(ctx context.Context, op redisio.Op, name, owner string, lease time.Duration) redisio.Reply
	ReadUnlock(ctx context.Context, op redisio.Op, name, owner string) redisio.Reply
	WriteUnlock(ctx context.Context, op redisio.Op, name, owner string, lease time.Duration) redisio.Reply
	RWRenew(ctx context.Context, name, owner string, write bool, lease time.Duration, stale func() bool, then func(bool, error))

	// RedissonFairLock. FairCancel waits for its reply: only a stopping
	// actor calls it.
	FairLock(ctx context.Context, op redisio.Op, name, owner string, lease, w time.Duration, now time.Time, tryOnly bool) redisio.Reply
	FairUnlock(ctx context.Context, op redisio.Op, name, owner string, lease time.Duration, now time.Time) redisio.Reply
	FairCancel(ctx context.Context, name, owner string, w time.Duration, now time.Time) (bool, error)
	FairCancelThen(ctx context.Context, name, owner string, w time.Duration, now time.Time, then func(bool, error))

	// RedissonSemaphore.
	SemaphoreAcquire(ctx context.Context, op redisio.Op, name string, n int) redisio.Reply
	SemaphoreAdd(ctx context.Context, op redisio.Op, name string, n int) redisio.Reply
	SemaphoreSet(ctx context.Context, op redisio.Op, name string, n int) redisio.Reply

	// RedissonPermitExpirableSemaphore (TrySetPermits uses the semaphore's
	// SemaphoreSet).
	PermitAcquire(ctx context.Context, op redisio.Op, name, member string, lease time.Duration) redisio.Reply
	PermitAdd(ctx context.Context, op redisio.Op, name string, n int) redisio.Reply
	PermitRelease(ctx context.Context, op redisio.Op, name, member string) redisio.Reply
	// RedissonCountDownLatch. CountDownGetThen reads the count without
	// waiting; then gets it on another goroutine.
	CountDownSet(ctx context.Context, op redisio.Op, name string, n int64) redisio.Reply
	CountDown(ctx context.Context, op redisio.Op, name string) redisio.Reply
	CountDownGetThen(ctx context.Context, name string, then func(n int64, err error))

	// The latch: settling a lost reply (latch_resolve.lua), deleting a
	// retiring actor's record.
	ResolveThen(ctx context.Context, op redisio.Op, then func(s redisio.Settlement, r redisio.Reply, err error))
	ForgetLatch(latch string, seq uint64)
	ForgetAtClose(latch string, seq uint64)

	// SubscribersThen counts the connections listening on a channel, and
	// those of them that are lockactor Clients'.
	SubscribersThen(ctx context.Context, channel string, then func(l redisio.Listeners, err error))

	// Close ends the calls still running, by deadline; false if some did not.
	Close(deadline time.Time) bool
}

// channels is the pub/sub the actors listen on: a handler per waiting
// actor and channel. *redisio.PubSub is the runtime's; the unit tests'
// fake delivers the events a test publishes.
type channels interface {
	Subscribe(ctx context.Context, channel string, h redisio.Handler) (uint64, error)
	Unsubscribe(ctx context.Context, channel string, id uint64) error
	// Requeue moves our connection to the back of channel's subscribers.
	Requeue(ctx context.Context, channel string) error
	// Barrier calls then once every message published before it reached
	// Redis has been delivered to channel's handlers, and before any
	// published later (a PING's PONG on the subscription's connection);
	// redisio.ErrNoBarrier while the channel is not subscribed yet.
	Barrier(ctx context.Context, channel string, then func()) error
	// Close drops the connections, by deadline; false if some did not end.
	Close(deadline time.Time) bool
}

// The runtime's implementations.
var (
	_ store    = (*redisio.Conn)(nil)
	_ channels = (*redisio.PubSub)(nil)
)
