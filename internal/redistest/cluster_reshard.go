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

// BeginSlotMove starts resharding key's slot to the master to and leaves it
// half done: CLUSTER SETSLOT IMPORTING on to and MIGRATING on the owner, no
// key moved. Until the returned finish runs (MIGRATE of the slot's keys and
// SETSLOT NODE everywhere, as MoveSlot), multi-key commands on the slot get
// TRYAGAIN or ASK. finish may be called from any goroutine; it returns the
// error the test should report. Moving a slot to its owner does nothing.
func (c *Cluster) BeginSlotMove(tb testing.TB, key string, to *Server) (finish func() error) {
	tb.Helper()
	st, err := c.beginMove(key, to)
	if err != nil {
		tb.Fatalf("redistest: BeginSlotMove(%q) to %s: %v", key, to.Addr(), err)
		return nil
	}
	return func() error {
		if st.from == to {
			return nil
		}
		return c.finishMove(st)
	}
}

// slotMove is a resharding of one slot under way.
type slotMove struct {
	key          string
	from, to     *Server
	slot         int
	fromID, toID string
}

func (c *Cluster) moveSlot(key string, to *Server) (from *Server, slot int, err error) {
	st, err := c.beginMove(key, to)
	if err != nil || st.from == to {
		return st.from, st.slot, err
	}
	return st.from, st.slot, c.finishMove(st)
}

// beginMove marks the slot IMPORTING on to and MIGRATING on its owner
// (nothing when to owns it already: st.from == to).
func (c *Cluster) beginMove(key string, to *Server) (st slotMove, err error) {
	st = slotMove{key: key, to: to, from: c.NodeFor(key)}
	if st.from == nil {
		return st, errNoMaster
	}
	if st.from == to {
		return st, nil
	}
	qctx, cancel := context.WithTimeout(context.Background(), clusterQueryTimeout)
	defer cancel()
	if st.slot, err = keySlot(qctx, to.Addr(), key); err != nil {
		return st, err
	}
	if st.fromID, err = myID(qctx, st.from.Addr()); err != nil {
		return st, err
	}
	if st.toID, err = myID(qctx, to.Addr()); err != nil {
		return st, err
	}
	fc, tc := queryClient(st.from.Addr()), queryClient(to.Addr())
	defer fc.Close()
	defer tc.Close()
	if err := tc.Do(qctx, "CLUSTER", "SETSLOT", st.slot, "IMPORTING", st.fromID).Err(); err != nil {
		return st, fmt.Errorf("%s: CLUSTER SETSLOT %d IMPORTING: %w", to.Addr(), st.slot, err)
	}
	if err := fc.Do(qctx, "CLUSTER", "SETSLOT", st.slot, "MIGRATING", st.toID).Err(); err != nil {
		return st, fmt.Errorf("%s: CLUSTER SETSLOT %d MIGRATING: %w", st.from.Addr(), st.slot, err)
	}
	return st, nil
}

// finishMove migrates the slot's keys and gives the slot to st.to.
func (c *Cluster) finishMove(st slotMove) error {
	ctx := context.Background()
	qctx, cancel := context.WithTimeout(ctx, clusterQueryTimeout)
	defer cancel()
	from, to, slot := st.from, st.to, st.slot
	fc := queryClient(from.Addr())
	defer fc.Close()
	for {
		keys, err := fc.ClusterGetKeysInSlot(qctx, slot, clusterMigrateBatch).Result()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER GETKEYSINSLOT %d: %w", from.Addr(), slot, err)
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
			return fmt.Errorf("%s: MIGRATE %d keys of slot %d: %w", from.Addr(), len(keys), slot, err)
		}
	}
	// The new owner first (it bumps its config epoch), then the old one,
	// then the other masters; replicas learn it from their masters.
	order := []*Server{to, from}
	nodes, err := clusterNodes(qctx, to.Addr())
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if s := c.byAddr(n.addr); s != nil && s != to && s != from && n.has("master") && !n.has("fail") && s.answering() {
			order = append(order, s)
		}
	}
	for _, s := range order {
		rc := queryClient(s.Addr())
		err := rc.Do(qctx, "CLUSTER", "SETSLOT", slot, "NODE", st.toID).Err()
		_ = rc.Close()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER SETSLOT %d NODE %s: %w", s.Addr(), slot, st.toID, err)
		}
	}
	err = poll(fmt.Sprintf("all nodes agree slot %d is on %s", slot, to.Addr()), clusterReadyTimeout, clusterPollInterval,
		func(ctx context.Context) error { return c.agreeOwner(ctx, st.key, to) })
	if err == nil {
		err = c.waitOK(clusterReadyTimeout)
	}
	return err
}
