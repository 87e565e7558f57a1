package redisio

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replica sync: a script that changes a lock is followed, on the same
// connection and in the same round trip, by WAIT (WAITAOF when the policy
// asks for it and the master knows the command), so that its reply says how many
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
	// AOF confirms with WAITAOF (the replicas have the change in their
	// AOF on disk) where the server has it, instead of WAIT. Every replica
	// counted must have appendonly on: one without never acknowledges.
	AOF bool
	// Required: the user asked for sync (WithReplicaSync given), so a
	// server that refuses WAIT does not turn it off: its grants are undone.
	Required bool
}

// ErrNotReplicated: a grant too few replicas acknowledged was undone.
var ErrNotReplicated = errors.New("lockactor: not acknowledged by enough replicas")

// syncTarget is how to confirm a pipeline on one master: need replicas to
// wait for (0: run unsynced), with WAITAOF when aof.
type syncTarget struct {
	addr string
	need int
	aof  bool
}

// targetAt works out the sync for a pipeline on the master at addr, whose
// client is rdb. Errors reading the master's facts leave the pipeline
// unsynced rather than failing it: its scripts will meet the same trouble
// and report it.
//
// WAIT confirms unless the policy asks for WAITAOF: the master's AOF says
// nothing of its replicas', and a replica without AOF never acknowledges
// WAITAOF, so choosing it from the master's appendonly undid every grant.
func (c *Conn) targetAt(ctx context.Context, addr string, rdb redis.UniversalClient) syncTarget {
	if c.sync.Replicas == 0 {
		return syncTarget{}
	}
	cl, ok := rdb.(*redis.Client)
	if !ok {
		return syncTarget{} // a Ring, or a Cluster client: no one connection
	}
	f, err := c.topo.facts(ctx, addr, cl)
	if err != nil || f.noWait {
		return syncTarget{}
	}
	need := c.sync.Replicas
	if need < 0 {
		need = f.replicas
	}
	return syncTarget{addr: addr, need: need, aof: c.aofAt(ctx, addr, cl, f)}
}

// aofAt reports whether WAITAOF confirms on the master at addr: only when
// the policy asks for it and the server has it (Redis 7.2+, asked once);
// otherwise WAIT does, with one warning when WAITAOF was asked for.
func (c *Conn) aofAt(ctx context.Context, addr string, cl *redis.Client, f nodeFacts) bool {
	if !c.sync.AOF {
		return false
	}
	if !f.aofKnown {
		has, err := knows(ctx, cl, "waitaof")
		if err != nil {
			return false // WAIT this time; asked again with the next pipeline
		}
		f = c.topo.knowsAOF(addr, has)
	}
	if f.noAOF {
		c.warnOnce("waitaof", slog.LevelWarn, "lockactor: WAITAOF was asked for but the server lacks it (Redis < 7.2); WAIT confirms instead", "addr", addr)
	}
	return !f.noAOF
}

// knowsAOF records whether the master at addr has WAITAOF.
func (t *Topology) knowsAOF(addr string, has bool) nodeFacts {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.nodes[addr]
	if f == nil {
		f = &nodeFacts{}
		t.nodes[addr] = f
	}
	f.aofKnown, f.noAOF = true, !has
	return *f
}

// warnOnce logs msg at level the first time key is warned of in this
// Client's life: a misconfiguration is said once, loudly, not per call.
func (c *Conn) warnOnce(key string, level slog.Level, msg string, args ...any) {
	c.warnMu.Lock()
	if c.warned[key] {
		c.warnMu.Unlock()
		return
	}
	if c.warned == nil {
		c.warned = make(map[string]bool)
	}
	c.warned[key] = true
	c.warnMu.Unlock()
	c.topo.log.Log(context.Background(), level, msg, args...)
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
