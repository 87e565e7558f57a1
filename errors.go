package lockactor

import (
	"errors"
	"fmt"

	"github.com/lockactor/lockactor/actors"
	"github.com/lockactor/lockactor/redisio"
)

// The sentinel errors. Every error the package returns matches one of these or
// the context's error with errors.Is, and names the lock it concerns.
var (
	// ErrNotHeld is returned by Unlock and Extend when the handle does not
	// hold the lock: it never held it, released it already, or its lease ran
	// out (and someone else may hold it now). A MultiLock's or RedLock's
	// Unlock returns it when too few of its members were held and none
	// failed.
	ErrNotHeld = errors.New("lockactor: lock not held")
	// ErrClosed is returned by every call on a Client that was closed, and
	// by calls still waiting when Close began. It is one value, whichever
	// layer noticed the Close.
	ErrClosed = redisio.ErrClosed
	// ErrInvalidArgument is returned when a call or its options are invalid:
	// an empty name (or, on a Redis Cluster, one whose keys would span
	// slots), a nil ctx, a negative lease or wait,
	// n <= 0 permits, a MultiLock or RedLock without locks or with a nil
	// one, a read-to-write upgrade of a ReadWriteLock, an Extend of a
	// watchdog-renewed hold. Nothing was changed in Redis.
	ErrInvalidArgument = errors.New("lockactor: invalid argument")
	// ErrNoQuorum is returned by a RedLock or MultiLock when it could not
	// reach the holds it needs: by Lock and TryLock when member errors alone
	// ruled the quorum out, by Unlock when too few members confirmed their
	// release. It carries a *MemberError for each member that failed.
	ErrNoQuorum = errors.New("lockactor: no quorum")
	// ErrReleasePending is returned by Unlock, and by a Semaphore's or
	// PermitSemaphore's Release, when the hold (or permits) was given up
	// but Redis has not confirmed the release yet: the ctx ended first, or
	// Redis failed twice. The runtime goes on releasing in the background,
	// until Redis confirms or (for a lock) the lease has run out; do not
	// release again. The error also matches the ctx's error or wraps
	// Redis's: `defer l.Unlock(ctx)` after a job whose ctx timed out may
	// log it, or ignore it with errors.Is(err, ErrReleasePending).
	ErrReleasePending = errors.New("lockactor: release pending")
	// ErrNotReplicated is returned by TryLock and TryAcquire when a grant
	// that too few replicas acknowledged was undone (WithReplicaSync); Lock
	// and Acquire keep trying instead. The error says why: how many
	// replicas acknowledged, or WAIT's own error (an ACL's NOPERM, for one).
	ErrNotReplicated = redisio.ErrNotReplicated
)

// maxNameInError bounds how much of a lock name an error message repeats;
// names may be up to 64 KiB and hold any bytes.
const maxNameInError = 128

// kindNouns name the kinds in errors: an error's message starts with the
// noun and the name, `semaphore "jobs": ...`.
var kindNouns = [numKinds]string{"lock", "fair lock", "fenced lock", "read lock", "write lock", "semaphore", "permit semaphore",
	"multilock", "redlock", "count-down latch", "spin lock", "mutex"}

// String is the kind's noun in errors.
func (k kind) String() string { return kindNouns[k] }

// err wraps e with the kind and name: `fair lock "orders": <e>`.
func (k kind) err(name string, e error) error {
	return fmt.Errorf("%s %q: %w", k, shortName(name), e)
}

// invalid builds an ErrInvalidArgument that says what was wrong.
func (k kind) invalid(name, what string) error {
	return k.err(name, fmt.Errorf("%w: %s", ErrInvalidArgument, what))
}

// closed is what every call returns after Close.
func (k kind) closed(name string) error { return k.err(name, ErrClosed) }

// notHeld is ErrNotHeld for what is not a lock (a permit): it says what was
// not held, and matches ErrNotHeld.
type notHeld struct{ what string }

// Error says what was not held.
func (e notHeld) Error() string { return "lockactor: " + e.what + " not held" }

// Is makes errors.Is(err, ErrNotHeld) true.
func (e notHeld) Is(target error) bool { return target == ErrNotHeld }

// shortName is name cut to maxNameInError bytes for an error message.
func shortName(name string) string {
	if len(name) > maxNameInError {
		return name[:maxNameInError] + "..."
	}
	return name
}

// MemberError is one member's failure within a MultiLock or RedLock
// operation. Errors matching ErrNoQuorum carry one per failed member; find
// them with errors.As:
//
//	var me *lockactor.MemberError
//	if errors.As(err, &me) { log.Println(me.Name, me.Err) }
//
// errors.As finds the first; a failure of several members joins their
// MemberErrors (errors.Join), which Unwrap() []error lists.
type MemberError struct {
	// Name is the member lock's name.
	Name string
	// Err is what went wrong at that member: a Redis error, ErrClosed when
	// the member's Client was closed, or an error saying that the member
	// did not answer within the group's node timeout.
	Err error
}

// Error names the member and says what went wrong there.
func (e *MemberError) Error() string {
	return fmt.Sprintf("member %q: %v", shortName(e.Name), e.Err)
}

// Unwrap gives the member's own error to errors.Is and errors.As.
func (e *MemberError) Unwrap() error { return e.Err }

// memberErrors rewrites a group coordinator's error for the caller: each
// *actors.MemberError in it, alone or joined with others, becomes a
// *MemberError. Other errors pass through unchanged.
func memberErrors(err error) error {
	switch e := err.(type) {
	case *actors.MemberError:
		return &MemberError{Name: e.Name, Err: e.Err}
	case interface{ Unwrap() []error }:
		errs := e.Unwrap()
		out := make([]error, len(errs))
		changed := false
		for i, part := range errs {
			out[i] = memberErrors(part)
			changed = changed || out[i] != part
		}
		if changed {
			return errors.Join(out...)
		}
	}
	return err
}
