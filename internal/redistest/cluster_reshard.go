package redistest

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// MoveSlot reshards the slot of key from its current master to the master
// to, the way redis-cli --cluster reshard does: CLUSTER SETSLOT IMPORTING on
// to and MIGRATING on the owner, MIGRATE of every key CLUSTER GETKEYSINSLOT
// lists (in batches, with REPLACE), then CLUSTER SETSLOT NODE on to, on the
// old owner and on every other master. It waits (at most 10s each) until
// every answering node names to as the slot's owner and the cluster is ok,
// and fails the test otherwise. Moving a slot to its owner does nothing.
// Clients see ASK redirections while the keys move and MOVED afterwards.
func (c *Cluster) MoveSlot(tb testing.TB, key string, to *Server) {
	tb.Helper()
	start := time.Now()
	from, slot, err := c.moveSlot(key, to)
	if err != nil {
		tb.Fatalf("redistest: MoveSlot(%q) to %s: %v", key, to.Addr(), err)
		return
	}
	if from != to {
		tb.Logf("redistest: slot %d (%q) moved from %s to %s in %v", slot, key, from.Addr(), to.Addr(), time.Since(start).Round(time.Millisecond))
	}
}

func (c *Cluster) moveSlot(key string, to *Server) (from *Server, slot int, err error) {
	ctx := context.Background()
	q := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, clusterQueryTimeout) }
	from = c.NodeFor(key)
	if from == nil {
		return nil, 0, errNoMaster
	}
	if from == to {
		return from, 0, nil
	}
	qctx, cancel := q()
	defer cancel()
	if slot, err = keySlot(qctx, to.Addr(), key); err != nil {
		return from, 0, err
	}
	fromID, err := myID(qctx, from.Addr())
	if err != nil {
		return from, slot, err
	}
	toID, err := myID(qctx, to.Addr())
	if err != nil {
		return from, slot, err
	}
	fc, tc := queryClient(from.Addr()), queryClient(to.Addr())
	defer fc.Close()
	defer tc.Close()
	if err := tc.Do(qctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID).Err(); err != nil {
		return from, slot, fmt.Errorf("%s: CLUSTER SETSLOT %d IMPORTING: %w", to.Addr(), slot, err)
	}
	if err := fc.Do(qctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID).Err(); err != nil {
		return from, slot, fmt.Errorf("%s: CLUSTER SETSLOT %d MIGRATING: %w", from.Addr(), slot, err)
	}
	for {
		keys, err := fc.ClusterGetKeysInSlot(qctx, slot, clusterMigrateBatch).Result()
		if err != nil {
			return from, slot, fmt.Errorf("%s: CLUSTER GETKEYSINSLOT %d: %w", from.Addr(), slot, err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", strconv.Itoa(to.Port()), "", 0, clusterMigrateTimeout, "REPLACE", "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		mctx, mcancel := context.WithTimeout(ctx, clusterMigrateTimeout*time.Millisecond)
		err = fc.Do(mctx, args...).Err()
		mcancel()
		if err != nil {
			return from, slot, fmt.Errorf("%s: MIGRATE %d keys of slot %d: %w", from.Addr(), len(keys), slot, err)
		}
	}
	// The new owner first (it bumps its config epoch), then the old one,
	// then the other masters; replicas learn it from their masters.
	order := []*Server{to, from}
	nodes, err := clusterNodes(qctx, to.Addr())
	if err != nil {
		return from, slot, err
	}
	for _, n := range nodes {
		if s := c.byAddr(n.addr); s != nil && s != to && s != from && n.has("master") && !n.has("fail") && s.answering() {
			order = append(order, s)
		}
	}
	for _, s := range order {
		rc := queryClient(s.Addr())
		err := rc.Do(qctx, "CLUSTER", "SETSLOT", slot, "NODE", toID).Err()
		_ = rc.Close()
		if err != nil {
			return from, slot, fmt.Errorf("%s: CLUSTER SETSLOT %d NODE %s: %w", s.Addr(), slot, toID, err)
		}
	}
	err = poll(fmt.Sprintf("all nodes agree slot %d is on %s", slot, to.Addr()), clusterReadyTimeout, clusterPollInterval,
		func(ctx context.Context) error { return c.agreeOwner(ctx, key, to) })
	if err == nil {
		err = c.waitOK(clusterReadyTimeout)
	}
	return from, slot, err
}
