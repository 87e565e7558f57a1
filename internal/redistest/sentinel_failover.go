package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// Failover waits until the deployment is stable (see WaitStable), sends
// SENTINEL FAILOVER <MasterName> to a sentinel (again while it answers
// NOGOODSLAVE) and waits until every answering sentinel names a former
// replica as master (with one replica, the replica; with more, the one the
// sentinels picked) and every other data server as its replica with the
// link up, and the servers say the same (INFO replication). It returns the
// new master and fails the test if that does not happen within 30s.
//
// Once the sentinels report the promotion, Failover itself sends the old
// master REPLICAOF <new master>: the sentinels would send the same, but only
// 8s after they first see it still claiming to be master, on an INFO they
// send a replica every 10s, so waiting for them made a Failover take ~21s
// instead of ~1-2s. Other replicas are re-pointed by the sentinels
// themselves, as part of the failover.
func (s *Sentinel) Failover(tb testing.TB) *Server {
	tb.Helper()
	old, err := s.waitStable(sentinelFailoverMax, nil, false)
	if err != nil {
		tb.Fatalf("redistest: Sentinel.Failover: not stable before: %v", err)
		return nil
	}
	start := time.Now()
	err = poll("SENTINEL FAILOVER accepted", sentinelFailoverMax, sentinelPoll, func(ctx context.Context) error {
		var errs []error
		for _, n := range s.sentinels {
			if !n.answering() {
				continue
			}
			sc := sentinelClient(n.Addr())
			err := sc.Failover(ctx, sentinelMasterName).Err()
			_ = sc.Close()
			if err == nil {
				return nil
			}
			if !isNoGood(err) {
				return &pollStop{fmt.Errorf("sentinel %s: SENTINEL FAILOVER: %w", n.Addr(), err)}
			}
			errs = append(errs, err)
		}
		return errors.Join(append(errs, errors.New("no sentinel accepted SENTINEL FAILOVER"))...)
	})
	var want *Server
	if err == nil {
		want, err = s.waitPromoted(sentinelFailoverMax, old)
	}
	promoted := time.Since(start)
	if err == nil {
		err = replicaOf(old, want)
	}
	if err == nil {
		_, err = s.waitStable(sentinelFailoverMax, want, false)
	}
	if err != nil {
		tb.Fatalf("redistest: Sentinel.Failover from %s to one of %v: %v", old.Addr(), addrsOf(s.others(old)), err)
		return nil
	}
	tb.Logf("redistest: sentinel failover from %s to %s: promoted in %v, old master replicating in %v",
		old.Addr(), want.Addr(), promoted.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	return want
}

// CrashFailover waits until the deployment is stable, kills the master
// (SIGKILL) and waits until every answering sentinel names a replica as
// master (the one replica, or the one they picked), with its failover
// finished, and that replica reports role:master.
// It returns the new master and fails the test if that does not happen
// within 30s. The old master stays down; after its Restart (it comes back
// empty, as a master) the sentinels turn it into a replica, which WaitStable
// waits for.
func (s *Sentinel) CrashFailover(tb testing.TB) *Server {
	tb.Helper()
	old, err := s.waitStable(sentinelFailoverMax, nil, false)
	if err != nil {
		tb.Fatalf("redistest: Sentinel.CrashFailover: not stable before: %v", err)
		return nil
	}
	start := time.Now()
	old.Kill(tb)
	want, err := s.waitPromoted(sentinelFailoverMax, old)
	if err != nil {
		tb.Fatalf("redistest: Sentinel.CrashFailover from %s to one of %v: %v", old.Addr(), addrsOf(s.others(old)), err)
		return nil
	}
	tb.Logf("redistest: sentinel crash failover from %s to %s in %v", old.Addr(), want.Addr(), time.Since(start).Round(time.Millisecond))
	return want
}

// WaitStable waits (at most 30s) until every answering sentinel names the
// same data server as master with flags "master" only (no failover in
// progress), knows the two other sentinels and lists every other data
// server as a replica (flags "slave" only), and the servers' INFO
// replication agrees, every replica's link to that master being up. It
// returns the master, and fails the test otherwise. After Restart of a crashed master (which comes back as an
// empty master) the sentinels take 10-20s to make it a replica again.
func (s *Sentinel) WaitStable(tb testing.TB) *Server {
	tb.Helper()
	m, err := s.waitStable(sentinelFailoverMax, nil, false)
	if err != nil {
		tb.Fatalf("redistest: Sentinel.WaitStable: %v", err)
		return nil
	}
	return m
}

// waitPromoted polls until every answering sentinel reports the same data
// server other than old as the master with flags "master" only, and that
// server reports role:master; it returns that server.
func (s *Sentinel) waitPromoted(timeout time.Duration, old *Server) (*Server, error) {
	var promoted *Server
	err := poll("sentinels promote a replica of "+old.Addr(), timeout, sentinelPoll, func(ctx context.Context) error {
		promoted = nil
		if err := s.eachSentinel(ctx, func(n *Server, m map[string]string) error {
			d := s.byPort(m["port"])
			switch {
			case d == nil || d == old || m["flags"] != "master":
				return fmt.Errorf("sentinel %s: master port %s flags %s", n.Addr(), m["port"], m["flags"])
			case promoted != nil && d != promoted:
				return fmt.Errorf("sentinels disagree: %s and %s", promoted.Addr(), d.Addr())
			}
			promoted = d
			return nil
		}); err != nil {
			return err
		}
		return wantRole(ctx, promoted, "master", nil)
	})
	return promoted, err
}

// waitStable polls stable until it holds (with want as master, if not nil)
// and returns the master.
func (s *Sentinel) waitStable(timeout time.Duration, want *Server, linkSeen bool) (*Server, error) {
	var master *Server
	err := poll("sentinel deployment stable", timeout, sentinelPoll, func(ctx context.Context) error {
		var err error
		master, err = s.stable(ctx, want, linkSeen)
		return err
	})
	return master, err
}

// stable is one check of WaitStable's condition.
// With linkSeen, the sentinels must also have seen every replica's link up.
func (s *Sentinel) stable(ctx context.Context, want *Server, linkSeen bool) (*Server, error) {
	var master *Server
	err := s.eachSentinel(ctx, func(n *Server, m map[string]string) error {
		d := s.byPort(m["port"])
		switch {
		case m["flags"] != "master":
			return fmt.Errorf("sentinel %s: master flags %s", n.Addr(), m["flags"])
		case m["num-other-sentinels"] != strconv.Itoa(sentinelCount-1):
			return fmt.Errorf("sentinel %s: num-other-sentinels %s", n.Addr(), m["num-other-sentinels"])
		case d == nil:
			return fmt.Errorf("sentinel %s: master port %s is not a data server", n.Addr(), m["port"])
		case want != nil && d != want:
			return fmt.Errorf("sentinel %s: master is %s, want %s", n.Addr(), d.Addr(), want.Addr())
		case master != nil && d != master:
			return fmt.Errorf("sentinels disagree: %s and %s", master.Addr(), d.Addr())
		}
		master = d
		return s.listsReplicas(ctx, n, d, m["port"], linkSeen)
	})
	if err != nil {
		return nil, err
	}
	if err := wantRole(ctx, master, "master", nil); err != nil {
		return nil, err
	}
	for _, r := range s.others(master) {
		if err := wantRole(ctx, r, "slave", master); err != nil {
			return nil, err
		}
	}
	return master, nil
}

// listsReplicas checks that sentinel n lists every data server but master
// (whose port is masterPort) as a replica with flags "slave" only; with
// linkSeen, also with its link to master up.
func (s *Sentinel) listsReplicas(ctx context.Context, n, master *Server, masterPort string, linkSeen bool) error {
	sc := sentinelClient(n.Addr())
	defer sc.Close()
	reps, err := sc.Replicas(ctx, sentinelMasterName).Result()
	if err != nil {
		return fmt.Errorf("sentinel %s: SENTINEL REPLICAS: %w", n.Addr(), err)
	}
	byPort := make(map[string]map[string]string, len(reps))
	for _, r := range reps {
		byPort[r["port"]] = r
	}
	for _, other := range s.others(master) {
		r, ok := byPort[strconv.Itoa(other.Port())]
		switch {
		case !ok:
			return fmt.Errorf("sentinel %s: %s is not among the %d replicas", n.Addr(), other.Addr(), len(reps))
		// The sentinels' view of a replica's link comes from an INFO they
		// send every 10s; after a failover it is stale that long. The
		// replica's own INFO (stable) is checked instead.
		case r["flags"] != "slave" || (linkSeen && (r["master-link-status"] != "ok" || r["master-port"] != masterPort)):
			return fmt.Errorf("sentinel %s: replica %s flags %s master-link-status %s master-port %s",
				n.Addr(), other.Addr(), r["flags"], r["master-link-status"], r["master-port"])
		}
	}
	return nil
}

// eachSentinel runs SENTINEL MASTER <name> on every answering sentinel and
// calls check with the reply; it fails if none answers.
func (s *Sentinel) eachSentinel(ctx context.Context, check func(n *Server, master map[string]string) error) error {
	asked := 0
	for _, n := range s.sentinels {
		if !n.answering() {
			continue
		}
		sc := sentinelClient(n.Addr())
		m, err := sc.Master(ctx, sentinelMasterName).Result()
		_ = sc.Close()
		if err != nil {
			return fmt.Errorf("sentinel %s: SENTINEL MASTER: %w", n.Addr(), err)
		}
		if err := check(n, m); err != nil {
			return err
		}
		asked++
	}
	if asked == 0 {
		return errors.New("no sentinel is running")
	}
	return nil
}

// wantRole checks INFO replication of d: role, and for a replica that it
// replicates from master with the link up.
func wantRole(ctx context.Context, d *Server, role string, master *Server) error {
	ri, err := info(ctx, d.Addr(), "replication")
	if err != nil {
		return err
	}
	if ri["role"] != role {
		return fmt.Errorf("%s: role:%s, want %s", d.Addr(), ri["role"], role)
	}
	if master != nil && (ri["master_port"] != strconv.Itoa(master.Port()) || ri["master_link_status"] != "up") {
		return fmt.Errorf("%s: master_port:%s master_link_status:%s, want %d up", d.Addr(), ri["master_port"], ri["master_link_status"], master.Port())
	}
	return nil
}

// replicaOf sends REPLICAOF <master> to d.
func replicaOf(d, master *Server) error {
	rc := queryClient(d.Addr())
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), clusterQueryTimeout)
	defer cancel()
	if err := rc.ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(master.Port())).Err(); err != nil {
		return fmt.Errorf("%s: REPLICAOF %s: %w", d.Addr(), master.Addr(), err)
	}
	return nil
}
