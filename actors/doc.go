// Package actors runs the lock actors: one actor per lock name per Client,
// spawned on first use and retired after it has had nothing held, queued or
// owed for a while.
//
// A lock actor owns everything a Client knows about one lock: the holds its
// owners have, the FIFO queue of local waiters, the pub/sub subscription that
// wakes them, the watchdog that renews the holds, and the releases it still
// owes Redis. Callers reach it only by message (package messages); its state
// lives in the actor and nowhere else, and the mailbox orders everything, so
// there are no mutexes around lock state. An actor never blocks a caller:
// callers wait on their own Request with their own ctx.
//
// Every actor has the same shape. A handler applies its event (a message, a
// timer, a script's reply) to the state and returns; reconcile then decides
// what runs next, one script at a time, and is the only code that grants or
// drops waiters; settle arms the one timer that brings it back. Each actor
// type states its invariant in its doc comment (lock.go, fair.go,
// semaphore.go, group.go). Every script that changes a lock runs through the
// actor's ledger (ledger.go), latched, so it is applied at most once even
// when go-redis sends it twice or its reply is lost.
//
// This package must never block a caller, never renew a hold after its
// Unlock, and never keep a waiter queued without a way to be woken.
//
// It is part of lockactor's implementation, not an API: its exported names
// serve the root package only and may change in any release.
package actors
