package redisio

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replica sync: a script that changes a lock is followed, on the same
// connection and in the same round trip, by WAIT (WAITAOF when the master
// has AOF on and knows the command), so that its reply says how many
// replicas had the change when it came back. WAIT counts the replication
// offset of its own connection's last write, which is why the two go out as
// one pipeline on the key's master and not through the pooled client.

// SyncPolicy says how many replicas must confirm each change, and how long
// to wait for them.
type SyncPolicy struct {
	// Replicas: < 0 every replica the master reports connected, read from
	// the master and refreshed while scripts run; 0 off; > 0 that many.
	Replicas int
	// Timeout bounds each WAIT.
	Timeout time.Duration
}

// ErrNotReplicated: a grant too few replicas acknowledged was undone.
var ErrNotReplicated = errors.New("lockactor: not acknowledged by enough replicas")

// syncTarget is where and how to confirm a script on key: c runs it with
// need replicas to wait for; need == 0 means run unsynced.
type syncTarget struct {
	addr string
	c    *redis.Client
	need int
	aof  bool // ask with WAITAOF
}

// target works out the sync for a script on key. Errors reading the
// master's facts leave the script unsynced rather than failing it: the
// script itself will meet the same trouble and report it.
func (c *Conn) target(ctx context.Context, key string) syncTarget {
	if c.sync.Replicas == 0 {
		return syncTarget{}
	}
	addr, cl, err := c.topo.master(ctx, key)
	if err != nil || cl == nil {
		return syncTarget{}
	}
	f, err := c.topo.facts(ctx, addr, cl)
	if err != nil || f.noWait {
		return syncTarget{}
	}
	need := c.sync.Replicas
	if need < 0 {
		need = f.replicas
	}
	return syncTarget{addr: addr, c: cl, need: need, aof: f.aof && !f.noAOF}
}

// runSynced runs s on t's master followed by its WAIT. The reply is marked
// Unsynced when the script ran but fewer than t.need replicas confirmed it.
func (c *Conn) runSynced(ctx context.Context, t syncTarget, s *redis.Script, keys []string, args ...any) Reply {
	cmd, acks, waitErr := c.pipeWait(ctx, t, s, keys, args)
	if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		_ = s.Load(ctx, t.c).Err()
		cmd, acks, waitErr = c.pipeWait(ctx, t, s, keys, args)
	}
	if err := cmd.Err(); isMoved(err) {
		// The slot moved: the cluster client follows the redirection;
		// this one call goes unsynced, the next finds the new master.
		c.topo.forget(t.addr)
		v, err := s.Run(ctx, c.rdb, keys, args...).Result()
		return Reply{Val: v, Err: err}
	}
	rep := Reply{Val: cmd.Val(), Err: cmd.Err()}
	if isUnknownCommand(waitErr) {
		c.topo.refuse(t.addr, t.aof, waitErr)
		return rep
	}
	if !rep.Failed() && (waitErr != nil || acks < int64(t.need)) {
		rep.Unsynced = true
		c.topo.forget(t.addr) // the replica count may have changed
	}
	return rep
}

// pipeWait sends EVALSHA and WAIT (or WAITAOF) as one pipeline on t.c and
// returns the script's reply and the number of replicas that confirmed.
func (c *Conn) pipeWait(ctx context.Context, t syncTarget, s *redis.Script, keys []string, args []any) (*redis.Cmd, int64, error) {
	pipe := t.c.Pipeline()
	cmd := s.EvalSha(ctx, pipe, keys, args...)
	wait := c.queueWait(ctx, pipe, t)
	_, _ = pipe.Exec(ctx) // errors are per command
	acks, err := waitAcks(wait)
	return cmd, acks, err
}

// queueWait adds the WAIT (or WAITAOF) for t to pipe.
func (c *Conn) queueWait(ctx context.Context, pipe redis.Pipeliner, t syncTarget) *redis.Cmd {
	timeout := max(c.sync.Timeout.Milliseconds(), 1)
	if t.aof {
		// WAITAOF numlocal numreplicas timeout: only the replicas' fsync
		// is asked for; the master's own is not what a failover needs.
		return pipe.Do(ctx, "waitaof", 0, t.need, timeout)
	}
	return pipe.Do(ctx, "wait", t.need, timeout)
}

// waitAcks reads a WAIT (an integer) or WAITAOF ([local, replicas]) reply.
func waitAcks(cmd *redis.Cmd) (int64, error) {
	v, err := cmd.Result()
	if err != nil {
		return 0, err
	}
	switch v := v.(type) {
	case int64:
		return v, nil
	case []any:
		if len(v) == 2 {
			n, _ := v[1].(int64)
			return n, nil
		}
	}
	return 0, errors.New("unexpected WAIT reply")
}
