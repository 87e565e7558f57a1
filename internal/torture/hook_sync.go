package torture

import (
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/scripts"
)

// SyncTally counts, for Clients that require replica sync, the grant and
// renewal scripts the hook saw go out with a WAIT in the same round trip
// and without one. The runtime counts a reply with no WAIT as confirmed,
// so a script of a Client given WithReplicaSync that goes out alone is a
// grant or renewal no replica was asked to confirm.
type SyncTally struct {
	GrantsWait, GrantsNoWait     atomic.Int64
	RenewalsWait, RenewalsNoWait atomic.Int64
	// InfoFailed counts the INFO reads that failed (a hook fault, a
	// stopped or killed server): the runtime then syncs by the replica
	// count it read last (redisio's targetAt).
	InfoFailed atomic.Int64
}

// infoOutcome counts cmds as a failed INFO read when they carry INFO and
// err says they failed (nil t: none).
func (t *SyncTally) infoOutcome(cmds []redis.Cmder, err error) {
	if t == nil || err == nil {
		return
	}
	for _, cmd := range cmds {
		if cmd.Name() == "info" {
			t.InfoFailed.Add(1)
			return
		}
	}
}

// grantSHAs are the scripts that can grant a lock hold (hand-offs grant
// the next waiter).
var grantSHAs = func() map[string]bool {
	m := map[string]bool{}
	for _, s := range []*redis.Script{scripts.Lock, scripts.FencedLock, scripts.Handoff, scripts.FairLock,
		scripts.ReadLock, scripts.WriteLock, scripts.Latched.Lock, scripts.Latched.FencedLock, scripts.Latched.Handoff,
		scripts.Latched.FairLock, scripts.Latched.ReadLock, scripts.Latched.WriteLock} {
		m[s.Hash()] = true
	}
	return m
}()

// count tallies the grant and renewal scripts among cmds (nil t: none).
func (t *SyncTally) count(cmds []redis.Cmder) {
	if t == nil {
		return
	}
	wait := waitIndex(cmds) >= 0
	for _, cmd := range cmds {
		sha, ok := scriptSHA(cmd.Args())
		switch {
		case !ok:
		case grantSHAs[sha] && wait:
			t.GrantsWait.Add(1)
		case grantSHAs[sha]:
			t.GrantsNoWait.Add(1)
		case (sha == renewSHA || sha == rwRenewSHA) && wait:
			t.RenewalsWait.Add(1)
		case sha == renewSHA || sha == rwRenewSHA:
			t.RenewalsNoWait.Add(1)
		}
	}
}

// waitIndex is the index of the WAIT (or WAITAOF) among cmds, or -1.
func waitIndex(cmds []redis.Cmder) int {
	for i, cmd := range cmds {
		if args := cmd.Args(); len(args) > 0 {
			if name, _ := args[0].(string); strings.EqualFold(name, "wait") || strings.EqualFold(name, "waitaof") {
				return i
			}
		}
	}
	return -1
}

// waitAcks is what a WAIT (an integer) or WAITAOF ([local, replicas])
// reply counted; 0 for an error or another reply.
func waitAcks(cmd redis.Cmder) int {
	c, ok := cmd.(*redis.Cmd)
	if !ok || c.Err() != nil {
		return 0
	}
	switch v := c.Val().(type) {
	case int64:
		return int(v)
	case []any:
		if len(v) == 2 {
			n, _ := v[1].(int64)
			return int(n)
		}
	}
	return 0
}

// replied reports to OnRenewReply the renewals among cmds (by index, as
// observe returned them) whose reply came back 1, with what the WAIT sent
// with them counted.
func (h *Hook) replied(cmds []redis.Cmder, renewals map[int]Renewal) {
	if h.OnRenewReply == nil || len(renewals) == 0 {
		return
	}
	acks := -1
	if w := waitIndex(cmds); w >= 0 {
		acks = waitAcks(cmds[w])
	}
	for i, r := range renewals {
		c, ok := cmds[i].(*redis.Cmd)
		if !ok || c.Err() != nil {
			continue
		}
		if n, err := c.Int64(); err == nil && n == 1 {
			h.OnRenewReply(RenewReply{Renewal: r, Acks: acks})
		}
	}
}
