// Package redisio is the only place where lockactor talks to Redis: it names
// the keys and channels of the Redisson layout, runs the scripts of package
// scripts and turns their replies into Go values, and multiplexes every
// pub/sub channel of a Client over as few subscription connections as it can,
// replacing any that breaks or stops answering.
//
// State-changing scripts from many actors go out together: each master has a
// group-commit pipeline (batch.go), followed by WAIT when replicas must
// confirm (replicas.go). What the servers can do, sharded pub/sub and replica
// counts, is learned from them when first needed (topology.go).
//
// It holds no lock state and makes no decisions: the lock actors decide, this
// package carries their commands. It must never close the caller's
// redis.UniversalClient (the Client does not own it) and never retry a command
// that may have run: such a failed reply goes back to the actor, which asks
// the request's latch (latch.go) whether it ran before it does anything
// else. Only replies that prove the script did not run (TRYAGAIN, MOVED,
// ASK, a refused dial, a closed node client) are sent again, in order, to
// the slot's master of the moment (batch_retry.go).
//
// It is part of lockactor's implementation, not an API: its exported names
// serve packages actors and lockactor only and may change in any release.
package redisio
