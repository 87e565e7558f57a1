package redistest

import (
	"fmt"
	"path/filepath"
	"testing"
)

// StartSentinelReplicas is StartSentinel with n replicas (n >= 1) instead
// of one: a master and n replicas of it, each started as StartReplicated
// starts its replica (with extraArgs), then the three sentinels. It waits
// until every sentinel reports the master, every replica with its link up
// and the two other sentinels. With n == 1 it is StartSentinel.
//
// With two or more replicas a Failover or CrashFailover promotes whichever
// replica the sentinels pick; the sentinels then re-point the other
// replicas at it (a full resync when the promoted one lacks writes they
// had: the case Redis Sentinel cannot make safe, see docs/DEPLOYMENT.md).
// WaitStable waits until every replica is linked to the current master.
func StartSentinelReplicas(tb testing.TB, n int, extraArgs ...string) *Sentinel {
	tb.Helper()
	if n < 1 {
		tb.Fatalf("redistest: StartSentinelReplicas: %d replicas, want at least 1", n)
		return nil
	}
	return startSentinelTB(tb, "StartSentinelReplicas", n, extraArgs)
}

// startExtraReplicas starts n more replicas of s's master in dir (each in
// a directory of its own), as startReplicated starts its replica, and waits
// until each is linked. What it started is in s.extra, for Stop.
func (s *Sentinel) startExtraReplicas(bin, dir string, n int, extraArgs []string) error {
	args := append(append([]string(nil), pairArgs...), extraArgs...)
	master := s.pair.master
	for i := range n {
		r, err := startReplicaOf(bin, filepath.Join(dir, fmt.Sprintf("replica%d", i+2)), master, master.Port(), args)
		if r != nil {
			s.extra = append(s.extra, r)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
