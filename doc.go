// Package lockactor is a library of distributed locks on Redis for Go
// services: Redisson's lock family, in Redisson's key layout, so that Go
// services and Java Redisson clients on the same Redis exclude and wake
// each other.
//
// Make one Client per process over a go-redis client (a single server, a
// Sentinel group or a Cluster) and take locks from it:
//
//	client, err := lockactor.New(rdb) // rdb is your redis.UniversalClient; Close leaves it open
//	if err != nil {
//		return err
//	}
//	defer client.Close()
//
//	mu := client.Mutex("invoice:42") // store it once; goroutines share it like a sync.Mutex
//	if err := mu.Lock(ctx); err != nil { // waits until held, or ctx ends
//		return err
//	}
//	defer mu.Unlock(ctx)
//
// # Which lock
//
//   - [Client.Mutex]: goroutines share it the way they share a sync.Mutex;
//     not reentrant; any goroutine may Unlock the current hold.
//   - [Client.Lock]: Redisson's RLock. A handle is one owner, reentrant:
//     give each goroutine (each owner) its own handle.
//   - [Client.FairLock]: granted in the order asked, across every process.
//   - [Client.FencedLock]: every acquisition carries a fencing token that
//     only grows, for storage that refuses stale writers.
//   - [Client.ReadWriteLock], [Client.SpinLock], [Client.Semaphore],
//     [Client.PermitSemaphore], [Client.CountDownLatch], and the groups
//     [NewMultiLock] (all locks or none) and [NewRedLock] (a majority of
//     independent masters).
//
// A hold without [WithLease] is renewed by a watchdog until Unlock (30 s
// leases by default, renewed every 10 s); one with WithLease ends when its
// lease does. Lost closes when a hold ends before its Unlock: a worker that
// must not outlive its lock watches it. Every error names the lock and
// matches one of the sentinel errors or the context's error with
// errors.Is; a Redis error is never reported as "not acquired".
//
// # How it works
//
// An embedded actor runtime serves each lock name of a Client with one
// actor: it owns the waiter queue, the pub/sub subscription that wakes it
// and the watchdog, and hands the lock from one local waiter to the next
// in a single script. The data path is: caller -> handle (this package) ->
// lock actor (package actors) -> package redisio -> Redis, and back through
// pub/sub. docs/ARCHITECTURE.md in the repository tells the rest, and
// docs/PROTOCOL.md the wire format.
package lockactor
