package redisio

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sharding chooses between sharded pub/sub (SPUBLISH/SSUBSCRIBE, Redis
// Cluster 7+) and the classic commands.
type Sharding int

// The sharding modes.
const (
	// ShardAuto: sharded on a Cluster whose masters know SPUBLISH (asked in
	// the background, at first use); classic everywhere else.
	ShardAuto Sharding = iota
	// ShardOn: always sharded.
	ShardOn
	// ShardOff: always PUBLISH/SUBSCRIBE.
	ShardOff
)

// Topology learns, lazily and from the servers themselves, what the
// deployment behind a go-redis client can do: whether its masters have
// sharded pub/sub, and how many replicas each master has (for WAIT). Nothing
// is sent until a lock operation needs an answer, so an idle Client stays
// silent.
type Topology struct {
	rdb     redis.UniversalClient
	cluster *redis.ClusterClient // nil unless rdb is a ClusterClient (commands are routed per master)
	real    bool                 // rdb is a Redis Cluster, not a ClusterClient over one Sentinel group
	mode    Sharding
	log     *slog.Logger

	sharded atomic.Int32 // 0 undecided, 1 sharded, 2 classic
	// spawn runs the SPUBLISH probe on a goroutine the Conn's Close waits
	// for (nil: a plain goroutine); false once Close has begun.
	spawn func(func()) bool

	mu      sync.Mutex
	probing chan struct{}         // closed when the running probe has an answer or gave up; nil: none runs
	gaveUp  time.Time             // when the last probe ended without an answer
	nodes   map[string]*nodeFacts // by master address; "" for a non-Cluster client
}

// nodeFacts is what one master told about its replication.
type nodeFacts struct {
	read     time.Time // when replicas and aof were read; zero: never
	replicas int       // connected_slaves
	aof      bool      // aof_enabled
	noWait   bool      // WAIT is refused (managed Redis): no sync on this node
	noAOF    bool      // WAITAOF is missing (Redis < 7.2): WAIT instead
	aofKnown bool      // whether WAITAOF exists has been asked
}

// factsFresh is how long a master's replica count is trusted before it is
// read again (only when a script needs it).
const factsFresh = time.Second

// NewTopology prepares the probes for rdb; it sends nothing.
func NewTopology(rdb redis.UniversalClient, mode Sharding, log *slog.Logger) *Topology {
	cc, _ := rdb.(*redis.ClusterClient)
	return &Topology{
		rdb: rdb, cluster: cc, real: IsCluster(rdb), mode: mode, log: log,
		nodes: make(map[string]*nodeFacts),
	}
}

// IsCluster reports whether rdb talks to a Redis Cluster. A
// *redis.ClusterClient whose options carry ClusterSlots does not: go-redis's
// NewFailoverClusterClient builds one over a Sentinel group (one master
// serving every slot), and a user-supplied slot map routes to servers that
// are not cluster-enabled. Those servers have no sharded pub/sub of their
// own, and a Redisson client on them listens with SUBSCRIBE.
func IsCluster(rdb redis.UniversalClient) bool {
	cc, ok := rdb.(*redis.ClusterClient)
	return ok && cc.Options().ClusterSlots == nil
}

// probeWait bounds how long a pipeline or a subscription waits for the
// SPUBLISH probe's first answer before it goes on with the default.
const probeWait = time.Second

// probeTimeout bounds one SPUBLISH probe (go-redis may ignore it on a hung
// node's socket; the probe's goroutine then ends with the read timeout).
const probeTimeout = 5 * time.Second

// probeAgain spaces probes that no master answered (a Cluster down, or
// COMMAND refused by an ACL), so pipelines do not each start one.
const probeAgain = 5 * time.Second

// decided is the SPUBLISH question's answer when it is settled: ok false
// while a ShardAuto Cluster's masters have not answered yet.
func (t *Topology) decided() (sharded, ok bool) {
	switch {
	case t.mode == ShardOn:
		return true, true
	case t.mode == ShardOff || !t.real:
		return false, true
	}
	if v := t.sharded.Load(); v != 0 {
		return v == 1, true
	}
	return false, false
}

// shardedNow is decided's answer, or the default while there is none (a
// Cluster: sharded, as Redis 7 and later have it), starting the probe in
// the background. It never waits: lock actors and the pub/sub lock call it.
func (t *Topology) shardedNow() bool {
	if v, ok := t.decided(); ok {
		return v
	}
	t.startProbe()
	return true
}

// Sharded reports whether channels are sharded. In ShardAuto mode on a
// Cluster the masters are asked whether they know SPUBLISH (Redis 7+, and
// not renamed away), in the background and concurrently; the first master
// that answers settles it for the Client's life (the masters of one Cluster
// run one version), so a hung master delays nobody. Sharded waits for that
// answer up to probeWait or ctx, and meanwhile answers the default
// (sharded). It may wait: never call it on an actor's goroutine or with
// a lock held.
func (t *Topology) Sharded(ctx context.Context) bool {
	if v, ok := t.decided(); ok {
		return v
	}
	done := t.startProbe()
	timer := time.NewTimer(probeWait)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	case <-ctx.Done():
	}
	return t.shardedNow()
}

// startProbe starts the SPUBLISH probe unless one runs, and returns the
// channel closed when it has an answer or gave up.
func (t *Topology) startProbe() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.probing != nil {
		return t.probing
	}
	done := make(chan struct{})
	if time.Since(t.gaveUp) < probeAgain {
		close(done) // no master answered a moment ago: the default holds meanwhile
		return done
	}
	t.probing = done
	run := func() { t.probe(done) }
	if t.spawn == nil || !t.spawn(run) {
		if t.spawn != nil { // closing: nobody needs the answer
			t.probing = nil
			close(done)
			return done
		}
		go run()
	}
	return done
}

// probe asks every master, concurrently, whether it knows SPUBLISH; the
// first answer settles Sharded, and done is closed then (or when every
// master failed).
func (t *Topology) probe(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	var once sync.Once
	answered := func() { once.Do(func() { close(done) }) }
	_ = t.cluster.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		ok, err := knows(ctx, n, "spublish")
		if err != nil {
			return err
		}
		t.record(n.Options().Addr, ok)
		answered()
		return nil
	})
	answered()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.probing = nil
	if t.sharded.Load() == 0 {
		t.gaveUp = time.Now()
	}
}

// record takes one master's answer; the first answer decides.
func (t *Topology) record(addr string, spublish bool) {
	v := int32(1)
	if !spublish {
		v = 2
	}
	switch {
	case t.sharded.CompareAndSwap(0, v):
		if !spublish {
			t.log.Warn("lockactor: a Cluster master lacks SPUBLISH (Redis < 7?); using PUBLISH/SUBSCRIBE", "addr", addr)
		}
	case t.sharded.Load() != v:
		t.log.Warn("lockactor: Cluster masters disagree on SPUBLISH (a mixed-version Cluster?); keeping the first answer",
			"addr", addr, "spublish", spublish, "sharded", t.sharded.Load() == 1)
	}
}

// knows reports whether the server n has the command name.
func knows(ctx context.Context, n *redis.Client, name string) (bool, error) {
	v, err := n.Do(ctx, "command", "info", name).Slice()
	if err != nil {
		return false, err
	}
	return len(v) == 1 && v[0] != nil, nil
}

// facts returns the master's replication facts, reading them again when
// they are older than factsFresh.
func (t *Topology) facts(ctx context.Context, addr string, c *redis.Client) (nodeFacts, error) {
	t.mu.Lock()
	f := t.nodes[addr]
	if f == nil {
		f = &nodeFacts{}
		t.nodes[addr] = f
	}
	cur := *f
	t.mu.Unlock()
	if time.Since(cur.read) < factsFresh {
		return cur, nil
	}
	pipe := c.Pipeline()
	repl := pipe.Info(ctx, "replication")
	pers := pipe.Info(ctx, "persistence")
	if _, err := pipe.Exec(ctx); err != nil {
		return cur, err
	}
	replicas, _ := strconv.Atoi(infoField(repl.Val(), "connected_slaves"))
	aof := infoField(pers.Val(), "aof_enabled") == "1"
	probeAOF := aof && !cur.aofKnown
	hasAOF := false
	if probeAOF {
		// WAITAOF came with Redis 7.2; ask once rather than fail a script.
		var err error
		if hasAOF, err = knows(ctx, c, "waitaof"); err != nil {
			return cur, err
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	f.read, f.replicas, f.aof = time.Now(), replicas, aof
	if probeAOF {
		f.aofKnown, f.noAOF = true, !hasAOF
	}
	return *f, nil
}

// refuse records that the master at addr refuses WAIT (or WAITAOF); the
// first time it is logged.
func (t *Topology) refuse(addr string, aof bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.nodes[addr]
	if f == nil {
		return
	}
	if aof {
		f.noAOF = true
		return
	}
	if !f.noWait {
		t.log.Warn("lockactor: the server refuses WAIT; replica sync is off for it", "addr", addr, "err", err)
	}
	f.noWait = true
}

// forget drops what is known of addr's replication (after a MOVED reply or
// a failover), so the next script reads it again.
func (t *Topology) forget(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.nodes, addr)
}

// infoField reads one "field:value" line of an INFO reply.
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// isUnknownCommand reports a server's refusal of a command it does not have.
func isUnknownCommand(err error) bool { return redis.HasErrorPrefix(err, "unknown command") }

// isMoved reports a Cluster redirection (the slot lives elsewhere now).
func isMoved(err error) bool {
	return redis.HasErrorPrefix(err, "MOVED ") || redis.HasErrorPrefix(err, "ASK ")
}
