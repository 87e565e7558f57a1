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
	// ErrNotHeld: unlock or extend by a handle that does not hold the lock.
	ErrNotHeld = errors.New("lockactor: lock not held")
	// ErrClosed: the Client was closed (one value, whichever layer noticed).
	ErrClosed = redisio.ErrClosed
	// ErrInvalidArgument: empty name, negative lease or wait, nil ctx, n <= 0
	// permits, nil locks. Nothing was sent to Redis.
	ErrInvalidArgument = errors.New("lockactor: invalid argument")
	// ErrNoQuorum: a RedLock or MultiLock could not reach the required holds.
	ErrNoQuorum = errors.New("lockactor: no quorum")
	// ErrNotReplicated: a grant that too few replicas acknowledged was
	// undone (WithReplicaSync). TryLock and TryAcquire report it; Lock and
	// Acquire keep trying. The error says why: how many replicas
	// acknowledged, or WAIT's own error (an ACL's NOPERM, for one).
	ErrNotReplicated = redisio.ErrNotReplicated
)

// maxNameInError bounds how much of a lock name an error message repeats;
// names may be up to 64 KiB and hold any bytes.
const maxNameInError = 128

// nameError wraps err with the lock's name: `lock "orders": <err>`.
func nameError(name string, err error) error {
	if len(name) > maxNameInError {
		name = name[:maxNameInError] + "..."
	}
	return fmt.Errorf("lock %q: %w", name, err)
}

// invalid builds an ErrInvalidArgument that says what was wrong.
func invalid(name, what string) error {
	return nameError(name, fmt.Errorf("%w: %s", ErrInvalidArgument, what))
}

// MemberError is one member's failure within a MultiLock or RedLock
// operation: Name is the member lock's name, Err what went wrong there.
// Errors of ErrNoQuorum carry one per failed member; match them with
// errors.As:
//
//	var me *lockactor.MemberError
//	if errors.As(err, &me) { log.Println(me.Name, me.Err) }
type MemberError = actors.MemberError
