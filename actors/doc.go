// Package actors runs the lock actors: one actor per lock name per Client,
// spawned on first use and retired after it has had no holds and no waiters
// for a while.
//
// A lock actor owns everything a Client knows about one lock: the holds its
// owners have, the FIFO queue of local waiters, the pub/sub subscription that
// wakes them and the watchdog timer that renews the holds. Callers reach it
// only by message (package messages); its state lives in the actor and
// nowhere else, and the mailbox orders everything, so there are no mutexes
// around lock state. An actor never blocks a caller: callers wait on their own
// Request with their own ctx.
package actors
