package redisio

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/lockactor/lockactor/scripts"
)

// The permit semaphore (RedissonPermitExpirableSemaphore): the count of a
// semaphore (see semaphore.go) plus a sorted set of held permit ids scored by
// their lease deadlines. Ids travel as 32 hex digits and are stored as their
// 16 raw bytes, as Redisson stores them.

// permitKeys are the keys of every permit script.
func permitKeys(name string) []string {
	return []string{name, PermitTimeouts(name), SemaphoreChannel(name)}
}

// PermitMember is the sorted-set member of the hex permit id.
func PermitMember(id string) (string, error) {
	b, err := hex.DecodeString(id)
	if err != nil || len(b) != 16 {
		return "", fmt.Errorf("permit id %q is not 32 hex digits", id)
	}
	return string(b), nil
}

// PermitAcquire takes one permit under the id (a PermitMember) for lease
// (read with Reply.Permit).
func (c *Conn) PermitAcquire(ctx context.Context, op Op, name, member string, lease time.Duration) Reply {
	keys := append(permitKeys(name), op.Latch)
	return c.runLatched(ctx, op, scripts.Latched.PermitAcquire, keys, member, ms(lease), c.publishArg(), op.Seq, op.keepMS())
}

// PermitAdd adds n permits (n < 0 removes) to a permit semaphore and
// publishes n when it is positive, as Redisson's does; it returns the new
// count (read with Reply.Int).
func (c *Conn) PermitAdd(ctx context.Context, op Op, name string, n int) Reply {
	keys := []string{name, SemaphoreChannel(name), op.Latch}
	return c.runLatched(ctx, op, scripts.Latched.PermitAdd, keys, n, c.publishArg(), op.Seq, op.keepMS())
}

// PermitRelease gives back the permit member: 1 given back, 0 not held (read
// with Reply.Int).
func (c *Conn) PermitRelease(ctx context.Context, op Op, name, member string) Reply {
	keys := append(permitKeys(name), op.Latch)
	return c.runLatched(ctx, op, scripts.Latched.PermitRelease, keys, member, c.publishArg(), op.Seq, op.keepMS())
}

// PermitUpdate gives the permit member a new lease from now; false when it
// is not held. It runs unlatched on the caller's goroutine: a second run
// sets the same lease again.
func (c *Conn) PermitUpdate(ctx context.Context, name, member string, lease time.Duration) (bool, error) {
	n, err := scripts.PermitUpdate.Run(ctx, c.cmds(), permitKeys(name), member, ms(lease), c.publishCmd(ctx)).Int64()
	return n == 1, err
}

// PermitAvailable is the count available after expired permits came back
// (0 when unset). Unlatched, like PermitUpdate.
func (c *Conn) PermitAvailable(ctx context.Context, name string) (int, error) {
	n, err := scripts.PermitAvailable.Run(ctx, c.cmds(), permitKeys(name), c.publishCmd(ctx)).Int64()
	return int(n), err
}

// Permit reads permit_acquire.lua's reply: granted, or else how long until
// the earliest lease of a held permit ends (next < 0: no permit is held).
func (r Reply) Permit() (granted bool, next time.Duration, err error) {
	if r.Err != nil {
		return false, 0, r.Err
	}
	vals, ok := r.Val.([]any)
	if !ok || len(vals) != 2 {
		return false, 0, fmt.Errorf("permit_acquire.lua: unexpected reply %v", r.Val)
	}
	a, ok1 := vals[0].(int64)
	b, ok2 := vals[1].(int64)
	if !ok1 || !ok2 {
		return false, 0, fmt.Errorf("permit_acquire.lua: unexpected reply %v", r.Val)
	}
	return a == 1, time.Duration(b) * time.Millisecond, nil
}
