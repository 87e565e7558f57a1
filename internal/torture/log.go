package torture

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/lockactor/lockactor"
)

// Prim is the kind of access a call or hold makes.
type Prim uint8

// The primitives. PrimRead and PrimWrite are the two views of a
// ReadWriteLock; PrimMulti is a MultiLock (its holds are exclusive holds of
// each member's name); PrimSpin a SpinLock (Lock's hash, no subscription);
// PrimPermit a PermitSemaphore (one permit per hold, its Owner the permit's
// id, always with a lease); PrimLatch a CountDownLatch (no holds: rounds of
// TrySetCount, CountDown and Await, judged by CheckLatches).
const (
	PrimLock Prim = iota
	PrimFair
	PrimFenced
	PrimRead
	PrimWrite
	PrimSem
	PrimMulti
	PrimSpin
	PrimPermit
	PrimLatch
	numPrims
)

var primNames = [numPrims]string{"lock", "fair", "fenced", "rw-read", "rw-write", "semaphore", "multilock", "spin", "permit", "latch"}

// String names the primitive.
func (p Prim) String() string {
	if p < numPrims {
		return primNames[p]
	}
	return fmt.Sprintf("prim(%d)", p)
}

// Exclusive reports whether a hold of p excludes every other owner's hold of
// the same name (all but read holds and permits of either semaphore).
func (p Prim) Exclusive() bool { return p != PrimRead && !p.Counted() }

// Counted reports whether holds of p are permits counted against
// Limits.Permits (Semaphore and PermitSemaphore) rather than owners of a
// hash field.
func (p Prim) Counted() bool { return p == PrimSem || p == PrimPermit }

// Op is what a call asked for.
type Op uint8

// The calls the workload makes.
const (
	OpLock Op = iota
	OpTryLock
	OpUnlock
	OpForceUnlock
	OpAcquire
	OpTryAcquire
	OpRelease
	OpSetPermits
	OpExtend
	OpUpdateLease
	OpSetCount
	OpCountDown
	OpAwait
	numOps
)

var opNames = [numOps]string{"Lock", "TryLock", "Unlock", "ForceUnlock", "Acquire", "TryAcquire", "Release", "TrySetPermits", "Extend",
	"UpdateLease", "TrySetCount", "CountDown", "Await"}

// String is the API call's name.
func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", o)
}

// acquires reports whether o asks for a hold.
func (o Op) acquires() bool {
	return o == OpLock || o == OpTryLock || o == OpAcquire || o == OpTryAcquire
}

// Outcome classifies what a call returned.
type Outcome uint8

// The outcomes. OutNo is a clean "not acquired" (TryLock false, nil error).
const (
	OutOK Outcome = iota
	OutNo
	OutCtx
	OutNotHeld
	OutRedis
	OutNoQuorum
	OutInvalid
	OutClosed
	OutPanic
	numOutcomes
)

var outNames = [numOutcomes]string{"ok", "not-acquired", "ctx", "not-held", "redis-error", "no-quorum", "INVALID-ARGUMENT", "CLOSED", "PANIC"}

// String names the outcome; the ones that are always violations are in
// capitals.
func (o Outcome) String() string {
	if o < numOutcomes {
		return outNames[o]
	}
	return fmt.Sprintf("outcome(%d)", o)
}

// PendingOwner begins the owner a Mutex call is recorded under until a
// grant tells which owner the acquisition used ("(mutex call 12)"): a call
// that ends without a hold keeps it.
const PendingOwner = "(mutex call "

// Ambiguous reports whether the call may or may not have taken effect in
// Redis: a Redis error (refused or lost reply) or an ended context.
func (o Outcome) Ambiguous() bool { return o == OutCtx || o == OutRedis || o == OutNoQuorum }

// Classify maps a call's result to an Outcome. Order matters: the sentinels
// that are violations come first so a wrapped one is never hidden.
func Classify(err error, ok bool) Outcome {
	switch {
	case err == nil && ok:
		return OutOK
	case err == nil:
		return OutNo
	case errors.Is(err, lockactor.ErrInvalidArgument):
		return OutInvalid
	case errors.Is(err, lockactor.ErrClosed):
		return OutClosed
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return OutCtx
	case errors.Is(err, lockactor.ErrNotHeld):
		return OutNotHeld
	case errors.Is(err, lockactor.ErrNoQuorum):
		return OutNoQuorum
	}
	return OutRedis
}

// Call is one call into the library.
type Call struct {
	ID     int
	G      int    // worker goroutine; -1 for the runner
	Client string // "A1", "B2", ...
	Prim   Prim
	Op     Op
	// Res are the resources ("<server>/<name>") the call touches and Owners
	// the owner (hash field without the ":write" suffix) on each; a MultiLock
	// has two, everything else one. A semaphore has no owner; a permit's
	// owner is its id (known once the acquire returned); a latch has none.
	Res    []string
	Owners []string
	N      int           // permits (semaphores); the count (TrySetCount)
	Wait   time.Duration // TryLock/TryAcquire wait bound; 0: one attempt
	Lease  time.Duration // WithLease; 0: watchdog
	// Waiting marks a call that may block until the resource is available
	// (Lock, TryLock with a wait, Acquire, TryAcquire with a wait): the
	// liveness check applies to it.
	Waiting bool
	Start   time.Time
	End     time.Time // zero while the call has not returned
	CtxEnd  time.Time // when its context ended or was due to end
	Out     Outcome
	Err     string
	Token   uint64 // fencing token of a FencedLock grant
	Holds   []int  // IDs of the holds this call granted or released
}

// Returned reports whether the call has returned.
func (c *Call) Returned() bool { return !c.End.IsZero() }

// Hold is one critical section as its owner saw it: from the first grant of
// a reentrant run to just before its last Unlock (Release for permits).
type Hold struct {
	ID    int
	G     int
	Prim  Prim
	Res   string
	Owner string // the owner id; a write view's hash field is Owner+":write"
	// Relayed is the owner whose hash field Redis kept the hold under when
	// another local owner relayed its hold to this one without a script
	// (see lockactor.WithRelay); empty: Owner's own.
	Relayed string
	N       int // permits (semaphores); 1 otherwise
	// AcqStart is when the granting call started: the acquire script ran
	// between AcqStart and Grant.
	AcqStart time.Time
	Grant    time.Time
	// Lease is the fixed lease of the latest grant; zero for watchdog holds.
	Lease time.Duration
	// LeaseUntil is the earliest moment a fixed lease could run out
	// (AcqStart of the latest grant + lease, or the start of a later
	// Extend + its lease, as Redis counts it: see leaseFloor); zero for
	// watchdog holds.
	LeaseUntil time.Time
	// LeaseLate is the latest moment it could run out (Grant + lease, or an
	// Extend's reply + its lease).
	LeaseLate time.Time
	Token     uint64
	// End is just before the last Unlock (Release) was called; zero if it
	// never was (the run ended first).
	End time.Time
	// Done is when that Unlock returned, and DoneOut what it returned.
	Done    time.Time
	DoneOut Outcome
	// Lost is when the handle's Lost channel was seen closed before End;
	// zero if it was not.
	Lost time.Time
	// Skipped marks permits not released because Redis restarted while they
	// were held (the epoch changed): the restart ends the hold.
	Skipped bool
	// ProbeAt is when a look at Redis right after the grant (HEXISTS of the
	// owner's field, on an unhooked connection) came back; ProbeGone, that
	// the field was not there: the caller was handed a hold Redis did not
	// have. Zero when no probe was made (or it failed).
	ProbeAt   time.Time
	ProbeGone bool
	// LostLate: the Lost channel was open when the last Unlock was called,
	// and closed when the run ended (the runtime decided afterwards that
	// the hold had been lost).
	LostLate bool
	// LostInUnlock: the Lost channel was closed by the time the last
	// Unlock returned (with LostLate: it closed while that Unlock was out).
	LostInUnlock bool
}

// Field is the hash field Redis keeps the hold under, as renewals name
// it: the owner's, or the one it was relayed from.
func (h *Hold) Field() string {
	owner := h.Owner
	if h.Relayed != "" {
		owner = h.Relayed
	}
	if h.Prim == PrimWrite {
		return owner + ":write"
	}
	return owner
}

// Renewal is one watchdog renewal command seen on the wire (or refused by
// the fault hook before it got there).
type Renewal struct {
	T      time.Time
	Client string
	Res    string // "<server>/<key>"
	Field  string // ARGV[2]: owner, or owner:write for a write view
}

// RenewReply is a renewal that found its hold (its script answered 1), as
// its Client's hook saw the reply come back: T is when the hook saw the
// command go out (no earlier than the runtime's own send time), Acks what
// the WAIT sent with it in the same round trip counted (0 also for a WAIT
// that failed), or -1 when no WAIT went with it.
type RenewReply struct {
	Renewal
	Acks int
}

// LeaseRun is a script that sets a lease (an acquire, a hand-off, a
// permit's grant, a renewal, a permit's new lease) as the hook saw it: by T
// it had run in Redis (or been replayed from its latch), setting Lease on
// Owner's hold of Res (a permit's Owner is its id in hex, as the caller
// sees it), so that lease ran out in Redis by T + Lease at the latest.
type LeaseRun struct {
	T      time.Time
	Script string // "lock", "handoff", "permit_acquire", "renew", "permit_update", ...
	Grants bool   // the script grants (an acquire, a hand-off); else it moves a held lease
	Res    string // "<server>/<key>"
	Owner  string
	Lease  time.Duration
}

// FaultKind is a kind of injected fault.
type FaultKind uint8

// The faults, and SemGen: not a fault but the switch to a fresh generation of
// semaphore names, kept in the same timeline so it never overlaps a fault.
const (
	FaultHook FaultKind = iota
	FaultKillPubSub
	FaultKillNormal
	FaultPause
	FaultRestart
	SemGen
	// FaultBlock refuses every command of one class (releases, or
	// settlements of lost replies) of one Client for a while: an outage
	// longer than a lease or a latch record, seen by one kind of request.
	FaultBlock
	// FaultLate delays the reply of every hand-off script of one server's
	// Clients that grants a short lease until after that lease ran out: the
	// new holder's grant reaches the runtime when Redis no longer has it.
	FaultLate
	// FaultScriptFlush empties the server's script cache (SCRIPT FLUSH), as
	// a switch to a replica that never loaded the scripts does: every
	// EVALSHA in flight or next is answered NOSCRIPT.
	FaultScriptFlush
	// FaultDenyPublish refuses PUBLISH to every Client of the server for a
	// while (an ACL rule on the default user), as managed services that
	// restrict pub/sub do: every script that publishes meets the refusal
	// after its writes, and waiters elsewhere hear nothing.
	FaultDenyPublish
	// FaultSubDelay makes what the pub/sub connections of one Client (or
	// every Client) of the server read arrive late, in order: a slow
	// subscriber connection, on which a message can reach its actor after
	// the command replies that followed it.
	FaultSubDelay
	// FaultSlowLink delays every command of one Client of the server by
	// the same lag for a while, as a slow link would: each script of that
	// Client stays in flight that much longer, and callers that arrive
	// meanwhile queue behind it in its actors.
	FaultSlowLink
	// FaultTokenDelete deletes every fencing token counter on the server
	// (Redisson's RFencedLock.delete() does it to one): the counters start
	// again from nothing, as after a restart without persistence.
	FaultTokenDelete
	numFaultKinds
)

var faultNames = [numFaultKinds]string{"hook", "client-kill-pubsub", "client-kill-normal", "sigstop", "restart", "semaphore-generation", "block", "late-release",
	"script-flush", "deny-publish", "pubsub-delay", "slow-link", "token-delete"}

// String names the fault.
func (k FaultKind) String() string {
	if k < numFaultKinds {
		return faultNames[k]
	}
	if name, ok := topoFaultNames[k]; ok {
		return name
	}
	return fmt.Sprintf("fault(%d)", k)
}

// Fault is one injected fault as it happened.
type Fault struct {
	Kind   FaultKind
	Server string
	Detail string
	Start  time.Time
	// End is when the fault was lifted; for a restart, when the new server
	// answered (its data is empty from Start on).
	End time.Time
}

// Log is everything a run recorded.
type Log struct {
	Start, End time.Time // the workload's run; End is when every worker stopped
	Calls      []Call
	Holds      []Hold
	Renewals   []Renewal
	Faults     []Fault
	// Withheld are the release scripts that ran but whose replies the hook
	// withheld.
	Withheld []Withheld
	// Runs are the lease-setting scripts the hook saw run (see LeaseRun,
	// CheckStaleGrants).
	Runs []LeaseRun
	// RenewReplies are the renewals the hook saw answered 1 (see
	// CheckLostDeadline).
	RenewReplies []RenewReply
	// Switches are the moments the sentinels named a new master (strict
	// variant only; see CheckStrict).
	Switches []Switch
	// News is what the sentinels announced of failovers (Sentinel
	// variants), for the strict variant's report.
	News []SentinelNews
	// Stalls are the spans in which the test process's timers ran late
	// (see Stall).
	Stalls []Stall
	// Settle is what the strict variant saw of the names once the run and
	// its faults were over (see CheckSettle); nil in other runs.
	Settle *Settle
}

// at renders t as an offset from the start of the run, for messages.
func (l *Log) at(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return fmt.Sprintf("+%.4fs", t.Sub(l.Start).Seconds())
}

// Dump writes the log as text, one event per line in time order, for a
// human chasing a violation: calls (start and end), holds, renewals, faults.
func (l *Log) Dump(w io.Writer) error {
	type line struct {
		t time.Time
		s string
	}
	var lines []line
	for i := range l.Calls {
		c := &l.Calls[i]
		lines = append(lines, line{c.Start, fmt.Sprintf("call #%d g%d %s %s %s %v owners=%v n=%d wait=%v lease=%v ctxEnd=%s start",
			c.ID, c.G, c.Client, c.Prim, c.Op, c.Res, c.Owners, c.N, c.Wait, c.Lease, l.at(c.CtxEnd))})
		if c.Returned() {
			lines = append(lines, line{c.End, fmt.Sprintf("call #%d g%d %s %s %s %v -> %s token=%d holds=%v %s",
				c.ID, c.G, c.Client, c.Prim, c.Op, c.Res, c.Out, c.Token, c.Holds, c.Err)})
		}
	}
	for i := range l.Holds {
		h := &l.Holds[i]
		lines = append(lines, line{h.Grant, fmt.Sprintf("hold #%d g%d %s %s owner=%s relayed=%q n=%d token=%d acq=%s end=%s done=%s(%s) lost=%s leaseUntil=%s skipped=%v",
			h.ID, h.G, h.Prim, h.Res, h.Owner, h.Relayed, h.N, h.Token, l.at(h.AcqStart), l.at(h.End), l.at(h.Done), h.DoneOut, l.at(h.Lost), l.at(h.LeaseUntil), h.Skipped)})
	}
	for _, r := range l.Renewals {
		lines = append(lines, line{r.T, fmt.Sprintf("renew %s %s field=%s", r.Client, r.Res, r.Field)})
	}
	for _, r := range l.RenewReplies { // at the send time; the reply came later
		lines = append(lines, line{r.T, fmt.Sprintf("renew answered 1 %s %s field=%s wait-acks=%d", r.Client, r.Res, r.Field, r.Acks)})
	}
	for _, s := range l.Stalls {
		lines = append(lines, line{s.Due, fmt.Sprintf("stall: the process's timers ran late, a wake due now came at %s (%v late)", l.at(s.Woke), s.Late().Round(time.Millisecond))})
	}
	for _, f := range l.Faults {
		lines = append(lines, line{f.Start, fmt.Sprintf("fault %s on %s until %s %s", f.Kind, f.Server, l.at(f.End), f.Detail)})
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].t.Before(lines[j].t) })
	bw := bufio.NewWriter(w)
	for _, ln := range lines {
		fmt.Fprintf(bw, "%s %s\n", l.at(ln.t), ln.s)
	}
	return bw.Flush()
}
