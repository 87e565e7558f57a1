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
// client is rdb. An error reading the master's facts does not fail the
// pipeline (its scripts meet the same trouble, or do not) and does not
// turn sync off for it either: an explicit count is waited for as it is,
// and "every replica" counts the replicas last read (none when never read).
// A transient INFO error once sent such a pipeline without WAIT, and its
// grants counted as confirmed.
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
	if Denied(err) {
		// An explicit count needs no INFO; "every replica" cannot be
		// counted, so sync is off there until INFO is allowed.
		c.topo.denyInfo(addr)
		if c.sync.Replicas < 0 {
			c.warnOnce("info", slog.LevelError, "lockactor: replica sync is off: the server denies INFO (ACL), so its replicas cannot be counted; allow INFO to this user, or give WithReplicaSync an explicit count", "addr", addr, "err", err)
			return syncTarget{}
		}
		f, err = nodeFacts{}, nil
	}
	if f.noWait {
		return syncTarget{}
	}
	if err != nil {
		c.topo.log.Debug("lockactor: reading the master's replicas failed; syncing by what was last read", "addr", addr, "err", err)
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

// waitRefused handles a WAIT (or WAITAOF) the master at t.addr refused: a
// missing command (some managed offerings) or an ACL denial (NOPERM). It
// reports true when the pipeline's changes stand because sync is now off
// for that master; false when they count as unconfirmed (grants undone).
// Either way the cause is logged once per Client, as an error: silence
// here once meant every TryLock failing with nothing in the log.
//
// WAITAOF refused: WAIT from the next pipeline on. WAIT refused under an
// explicit WithReplicaSync (Required): the requirement stands, so nothing
// can be granted there until WAIT is allowed. Under the default policy:
// sync off for that master.
func (c *Conn) waitRefused(t syncTarget, err error) bool {
	denied := Denied(err)
	if !denied && !isUnknownCommand(err) {
		return false
	}
	switch {
	case t.aof:
		c.topo.refuse(t.addr, true, err)
		c.warnOnce("waitaof-refused", slog.LevelWarn, "lockactor: the server refuses WAITAOF; WAIT confirms instead", "addr", t.addr, "err", err)
		return true
	case c.sync.Required:
		c.warnOnce("wait-required", slog.LevelError, "lockactor: the server refuses WAIT, so no change can be confirmed on replicas: every grant there is undone (TryLock returns ErrNotReplicated, Lock waits) until WAIT is allowed; allow WAIT to this user, or drop WithReplicaSync", "addr", t.addr, "err", err)
		return false
	case !denied:
		c.topo.refuse(t.addr, false, err) // logs once per master
		return true
	}
	c.topo.waitOff(t.addr)
	c.warnOnce("wait-denied", slog.LevelError, "lockactor: replica sync is off: the server denies WAIT (ACL), so grants are not confirmed on replicas; allow WAIT to this user, or pass WithReplicaSync(0, ...) to say sync is not wanted", "addr", t.addr, "err", err)
	return true
}

// waitOff turns sync off for the master at addr (its WAIT is denied),
// without refuse's log: waitRefused says why.
func (t *Topology) waitOff(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f := t.nodes[addr]; f != nil {
		f.noWait = true
	}
}

// denyInfo keeps empty facts for the master at addr for factsFresh: its
// INFO is denied, and asking again before every pipeline would only add a
// round trip.
func (t *Topology) denyInfo(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f := t.nodes[addr]; f != nil {
		f.read, f.replicas, f.aof = time.Now(), 0, false
	}
}

// Denied reports whether err is an ACL denial (NOPERM): the command will
// not run for this user, however often it is asked.
func Denied(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOPERM") }

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
