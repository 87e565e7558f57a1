package redisio

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/scripts"
)

// Every script that changes a lock runs latched (scripts/latch.lua): its
// reply is recorded under a latch key with the request's sequence number, so
// a copy that go-redis sends again after a broken connection replays the
// reply instead of changing the lock twice. When a reply is lost, Resolve
// learns whether the request ran and, if it had not, makes sure it never
// will.

// LatchKey is the latch of one Client's requests on one lock name of one
// kind (kind names the Client's actor: Lock, FencedLock and ReadWriteLock
// share a name's hash but are separate actors, each with requests of its
// own in flight); it shares the lock's Cluster slot.
func LatchKey(name, clientID, kind string) string {
	return prefixed("lockactor_latch", name) + ":" + clientID + ":" + kind
}

// Op identifies one latched request.
type Op struct {
	Latch string        // LatchKey of the lock and Client
	Seq   uint64        // increases with every request of the Client
	Keep  time.Duration // how long the latch must outlive the request
	// Keys, when they are the name's and Latch's, spare the call converting
	// them again (see args.go); the actor's ledger sets them.
	Keys *Keys
	// Then, when set, makes the call asynchronous: once the request is
	// queued for its master's next pipeline the call returns ErrPending,
	// and Then later receives the reply on another goroutine (it must not
	// block). A call that fails before its request is queued returns that
	// error as usual and does not call Then.
	Then func(Reply)
}

// ErrPending is what an asynchronous call (Op.Then set) returns once its
// request is on its way; the reply goes to Op.Then.
var ErrPending = errors.New("request queued; the reply follows")

// LatchNil is the status reply latch.lua sends for its body's nil reply
// (a nil reply is an error to go-redis, and each costs a client about
// twenty allocations in its retry checks); the batcher turns it back into
// a nil reply. A go-redis hook sees it as it comes off the wire.
const LatchNil = "LOCKACTOR_NIL"

// Reply is one script's reply as go-redis returned it, or as a latch
// recorded it. A nil reply has Err redis.Nil, as go-redis reports it.
type Reply struct {
	Val any
	Err error
	// Unsynced: the script ran, but fewer replicas than the sync policy
	// requires confirmed it (see SyncPolicy). A grant in such a reply is
	// to be undone.
	Unsynced bool
	// SyncErr says why, when Unsynced: too few acknowledgements, or the
	// WAIT's own error (a refusal such as NOPERM, a broken connection).
	SyncErr error
}

// NotReplicated is the error for a grant undone because r is Unsynced: it
// matches ErrNotReplicated and carries the cause.
func (r Reply) NotReplicated() error {
	if r.SyncErr == nil {
		return ErrNotReplicated
	}
	return fmt.Errorf("%w: %w", ErrNotReplicated, r.SyncErr)
}

// Failed reports whether the request failed (a nil reply is an answer).
func (r Reply) Failed() bool { return r.Err != nil && !errors.Is(r.Err, redis.Nil) }

// Unknown reports whether a failed request may nevertheless have run: the
// connection broke or timed out after the command was written, possibly on
// an earlier attempt of go-redis's own retries. Only an error reply from
// the server proves that it did not.
func Unknown(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) {
		return false
	}
	var re redis.Error
	var ns notSent
	return !errors.As(err, &re) && !errors.As(err, &ns) && !dialFailed(err)
}

// Final reports whether err is Redis refusing a command for what its key
// holds, which no retry changes until someone changes the key: WRONGTYPE
// (a name used by another kind: a lock's hash where a semaphore's count
// should be), a value that is not a number or would overflow, and an
// error raised while a script ran (it found data it cannot read). Every
// other error may pass (a broken connection, a server loading, busy, out
// of memory or read-only during a failover, a refused ACL): those are worth
// retrying, also where Redis 6 wraps them in a script's error.
func Final(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	return finalReply(re.Error())
}

// finalReply is Final for the text of an error reply. Redis 6 reports an
// error a script's command met before it ran (READONLY, OOM, ...) as
// "ERR Error running script (call to f_<sha>): @user_script:1:
// @user_script: 1: -READONLY You can't write...": the wrapped reply, after
// the last ": -", decides.
func finalReply(msg string) bool {
	if i := strings.LastIndex(msg, ": -"); i >= 0 {
		return finalReply(msg[i+len(": -"):])
	}
	switch {
	case strings.HasPrefix(msg, "WRONGTYPE"):
		return true
	case !strings.HasPrefix(msg, "ERR"):
		return false
	}
	for _, s := range finalERR {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// finalERR are the texts that make an ERR reply final (see Final): a value
// that is not a count, and errors raised inside a script (Redis 7 names the
// script "user_script"; Redis 6 says "Error running script"; the in-process
// fake says "Error compiling script" for these as well as for a script that
// does not compile, which no retry mends either).
var finalERR = []string{"not an integer", "out of range", "overflow", "user_script", "Error running script", "Error compiling script"}

// notSent is an error met before a request was written (the servers could
// not be asked what they support): the request certainly did not run.
type notSent struct{ err error }

func (e notSent) Error() string { return e.err.Error() }
func (e notSent) Unwrap() error { return e.err }

// runLatched runs a latched script for op: waits for its reply, or, with
// op.Then set, queues it and returns ErrPending. keys and args are the
// body's followed by the latch's: op.Latch, and op.Seq and op.keepMS() (see
// latched).
//
// With replica sync on, the script goes to the key's master followed by its
// WAIT (see replicas.go), and the reply says whether enough replicas had it.
func (c *Conn) runLatched(ctx context.Context, op Op, s *redis.Script, keys []string, args ...any) Reply {
	return c.runCall(ctx, op, newCall(ctx, s, keys, args, nil))
}

// runCall is runLatched for a call built by the caller (the hot paths build
// its arguments from their Keys in one slice; see args.go).
func (c *Conn) runCall(ctx context.Context, op Op, call *batchCall) Reply {
	b, err := c.batcherFor(ctx, call.key)
	if err != nil {
		return Reply{Err: notSent{err}}
	}
	if op.Then == nil {
		return b.run(call)
	}
	call.then = op.Then
	if !b.queue(call) {
		return Reply{Err: notSent{ErrClosed}}
	}
	return Reply{Err: ErrPending}
}

// keepMS is the latch's lifetime in whole milliseconds, at least 1.
func (op Op) keepMS() int64 { return max(op.Keep.Milliseconds(), 1) }

// tombstoneKeep is the least a cancelled request's mark is kept: a copy of
// the request still on its way (a paused server, a slow network) must find
// it, however short-lived the request's own record would have been.
const tombstoneKeep = time.Minute

// Settlement is what Redis remembers of a request whose reply was lost.
type Settlement uint8

// The settlements latch_resolve.lua gives.
const (
	// NotRun: the request did not run, and now never will (a newer record
	// or its cancellation stands in its way).
	NotRun Settlement = iota
	// Ran: the request ran; the Reply is the one it gave.
	Ran
	// NoRecord: the latch holds no record at all. The request did not run if
	// a record of it would still live (it is cancelled now, so it never
	// will); past its record's life nobody can tell (see Op.Keep).
	NoRecord
)

// String names the settlement (for logs).
func (s Settlement) String() string {
	switch s {
	case Ran:
		return "ran"
	case NoRecord:
		return "no-record"
	}
	return "not-run"
}

// ResolveThen settles a request whose reply was lost: then learns what Redis
// remembers of it (a Settlement), and the recorded reply if it ran. The
// question goes out with the latch's master's next pipeline, and then
// receives the answer on another goroutine (it must not block), or at once
// when the question cannot be queued.
//
// A settlement that finds the request ran renews its record, a write, so
// that the WAIT that follows it with replica sync on measures this request
// on every Redis version; a recorded grant that too few replicas confirmed
// comes back Unsynced.
func (c *Conn) ResolveThen(ctx context.Context, op Op, then func(s Settlement, r Reply, err error)) {
	b, err := c.batcherFor(ctx, op.Latch)
	if err != nil {
		then(NotRun, Reply{}, err)
		return
	}
	keep := ms(max(op.Keep, tombstoneKeep))
	read := func(r Reply) {
		vals, _ := r.Val.([]any)
		s, rep, err := readResolve(vals, r.Err)
		if r.Unsynced && s == Ran {
			rep.Unsynced, rep.SyncErr = true, r.SyncErr
		}
		then(s, rep, err)
	}
	if !b.submit(ctx, read, scripts.Resolve, []string{op.Latch}, strconv.FormatUint(op.Seq, 10), keep) {
		then(NotRun, Reply{}, ErrClosed)
	}
}

// readResolve reads latch_resolve.lua's reply.
func readResolve(vals []any, err error) (Settlement, Reply, error) {
	if err != nil {
		return NotRun, Reply{}, err
	}
	if len(vals) == 2 {
		if code, ok := vals[1].(string); ok && vals[0] == int64(1) {
			return Ran, decodeReply(code), nil
		}
	}
	if len(vals) == 1 {
		switch vals[0] {
		case int64(0):
			return NotRun, Reply{}, nil
		case int64(2):
			return NoRecord, Reply{}, nil
		}
	}
	return NotRun, Reply{}, fmt.Errorf("latch_resolve.lua: unexpected reply %v", vals)
}

// ForgetLatch deletes the latch, in the background, once seq, the Client's
// last request on the name, is settled. Deletions from many retiring actors
// go out together as pipelines; a deletion that fails leaves the latch to
// expire.
func (c *Conn) ForgetLatch(latch string, seq uint64) {
	if b, err := c.batcherFor(context.Background(), latch); err == nil {
		b.post(scripts.ForgetLatch, []string{latch}, strconv.FormatUint(seq, 10))
	}
}

// decodeReply turns a latch's record (n, i<int>, a<int>,...) back into the
// value go-redis would have returned.
func decodeReply(code string) Reply {
	switch {
	case strings.HasPrefix(code, "i"):
		n, err := strconv.ParseInt(code[1:], 10, 64)
		return Reply{Val: n, Err: err}
	case strings.HasPrefix(code, "a"):
		var vals []any
		for part := range strings.SplitSeq(code[1:], ",") {
			n, err := strconv.ParseInt(part, 10, 64)
			if err != nil {
				return Reply{Err: err}
			}
			vals = append(vals, n)
		}
		return Reply{Val: vals}
	}
	return Reply{Err: redis.Nil}
}

// intOf reads an integer reply; isNil reports a nil reply.
func (r Reply) intOf() (n int64, isNil bool, err error) {
	if errors.Is(r.Err, redis.Nil) {
		return 0, true, nil
	}
	if r.Err != nil {
		return 0, false, r.Err
	}
	n, ok := r.Val.(int64)
	if !ok {
		return 0, false, fmt.Errorf("unexpected reply %v", r.Val)
	}
	return n, false, nil
}

// Acquire reads the reply of an acquire script (lock, read lock, fair lock):
// granted, or the wait the script estimates (the holder's TTL).
func (r Reply) Acquire() (granted bool, wait time.Duration, err error) {
	n, isNil, err := r.intOf()
	return isNil && err == nil, time.Duration(n) * time.Millisecond, err
}

// Write reads write_lock.lua's reply; upgrade means the owner holds read
// holds only, so waiting would wait for itself.
func (r Reply) Write() (granted, upgrade bool, ttl time.Duration, err error) {
	granted, ttl, err = r.Acquire()
	if err == nil && !granted && ttl == upgradeReply*time.Millisecond {
		return false, true, 0, nil
	}
	return granted, false, ttl, err
}

// Fenced reads fenced_lock.lua's {granted, token or ttl} reply.
func (r Reply) Fenced() (granted bool, ttl time.Duration, token uint64, err error) {
	if r.Err != nil {
		return false, 0, 0, r.Err
	}
	vals, ok := r.Val.([]any)
	if !ok || len(vals) != 2 {
		return false, 0, 0, fmt.Errorf("fenced_lock.lua: unexpected reply %v", r.Val)
	}
	flag, _ := vals[0].(int64)
	n, _ := vals[1].(int64)
	if flag == 1 {
		return true, 0, uint64(n), nil
	}
	return false, time.Duration(n) * time.Millisecond, 0, nil
}

// Unlock reads the nil/0/1/2/3/4 reply of the unlock scripts.
func (r Reply) Unlock() (UnlockResult, error) {
	n, isNil, err := r.intOf()
	switch {
	case err != nil || isNil:
		return NotHeld, err
	case n == 1:
		return Released, nil
	case n == 2:
		return Left, nil
	case n == 3:
		return HandedOver, nil
	case n == 4:
		return ReleasedQuiet, nil
	}
	return StillHeld, nil
}

// Int reads an integer reply (the semaphore scripts).
func (r Reply) Int() (int64, error) {
	n, _, err := r.intOf()
	return n, err
}
