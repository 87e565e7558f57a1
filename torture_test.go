//go:build full

package lockactor_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
	"github.com/lockactor/lockactor/internal/torture"
)

// The lock-torture suite (internal/torture): a seeded random workload of
// every primitive against two real redis-server processes while faults are
// injected, then a checker over the whole event log. It is meant to find
// bugs; see internal/torture's documentation for what it checks.
//
//	LOCKACTOR_TORTURE=10m        length of each run (default: fixed 25s, random 15s); give go test a -timeout to match
//	LOCKACTOR_TORTURE_SEED=1234  run only that seed (replay)
//	LOCKACTOR_TORTURE_DUMP=DIR   write each run's event log to DIR/torture-<seed>.log
const (
	tortureEnv     = "LOCKACTOR_TORTURE"
	tortureSeedEnv = "LOCKACTOR_TORTURE_SEED"
	tortureDumpEnv = "LOCKACTOR_TORTURE_DUMP"
	// violationsShown bounds how many violations of one check the failure
	// message lists; the figures count them all.
	violationsShown = 5
)

func TestTorture(t *testing.T) {
	if testing.Short() {
		t.Skip("the torture suite runs for more than a minute; skipped with -short")
	}
	fixed, random := tortureLength(t, 25*time.Second), tortureLength(t, 15*time.Second)
	if seed, ok := tortureSeed(t); ok {
		t.Run("seed", func(t *testing.T) { runTorture(t, seed, fixed) })
		return
	}
	t.Run("fixed", func(t *testing.T) { runTorture(t, 1, fixed) })
	t.Run("random", func(t *testing.T) { runTorture(t, time.Now().UnixNano(), random) })
}

func runTorture(t *testing.T, seed int64, d time.Duration) {
	replay := fmt.Sprintf("%s=%d %s=%v go test -race -tags full -run TestTorture -count=1 -v .", tortureSeedEnv, seed, tortureEnv, d)
	t.Logf("torture seed %d for %v; replay: %s", seed, d, replay)
	a, b := redistest.Start(t), redistest.Start(t)
	if a.Embedded() || b.Embedded() {
		t.Skip("the torture suite needs real redis-server processes (SIGSTOP, restart, CLIENT KILL)")
	}
	dump := tortureDump("torture", seed)
	res := torture.Run(t, torture.Config{Seed: seed, Duration: d, A: a, B: b, OwnerOf: lockactor.OwnerOf, HoldField: lockactor.HoldField, MutexHolder: lockactor.MutexHolder,
		Logf: func(format string, args ...any) { t.Logf("torture: "+format, args...) }, DumpPath: dump,
		// Latch records outlived by the suite's longest outages (blocked
		// settlements of up to 7s).
		Options: []lockactor.Option{lockactor.WithLatchKeep(2 * time.Second)}})
	reportTorture(t, seed, replay, res)
}

// tortureLength is LOCKACTOR_TORTURE's duration, or def when it is unset.
func tortureLength(t *testing.T, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(tortureEnv)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 10m (%v)", tortureEnv, v, err)
	}
	// go test's -timeout (10m unless given) covers every run of the
	// package: say so now rather than panic in the middle of a run.
	if deadline, ok := t.Deadline(); ok && time.Until(deadline) < d+tortureMargin {
		t.Fatalf("%s=%v: a run takes %v (and a minute or two to check), but go test's -timeout ends in %v; "+
			"give -timeout: %v per run plus a few minutes (-run TestTorture has six runs)",
			tortureEnv, d, d, time.Until(deadline).Round(time.Second), d)
	}
	return d
}

// tortureMargin is what a run takes beyond its length: starting servers,
// settling, the end-of-run checks.
const tortureMargin = 2 * time.Minute

// tortureSeed is LOCKACTOR_TORTURE_SEED's seed; false when it is unset.
func tortureSeed(t *testing.T) (int64, bool) {
	t.Helper()
	v := os.Getenv(tortureSeedEnv)
	if v == "" {
		return 0, false
	}
	seed, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: want an integer seed (%v)", tortureSeedEnv, v, err)
	}
	return seed, true
}

// tortureDump is where LOCKACTOR_TORTURE_DUMP asks for a run's event log,
// or "".
func tortureDump(prefix string, seed int64) string {
	if dir := os.Getenv(tortureDumpEnv); dir != "" {
		return filepath.Join(dir, fmt.Sprintf("%s-%d.log", prefix, seed))
	}
	return ""
}

// reportTorture logs a run's figures and fails the test with its
// violations (at most violationsShown of each check) and the replay line.
func reportTorture(t *testing.T, seed int64, replay string, res torture.Result) {
	t.Helper()
	t.Logf("torture seed %d figures:\n%s", seed, res.Figures)
	if len(res.Violations) == 0 {
		return
	}
	t.Errorf("torture seed %d: %d violation(s); replay: %s\n%s", seed, len(res.Violations), replay, violationsText(res.Violations))
}

// violationsText lists vs, at most violationsShown of each check, and how
// many more of each there were.
func violationsText(vs []torture.Violation) string {
	var b strings.Builder
	shown := map[string]int{}
	for _, v := range vs {
		if shown[v.Check]++; shown[v.Check] <= violationsShown {
			fmt.Fprintf(&b, "  %s\n", v)
		}
	}
	for check, n := range shown {
		if n > violationsShown {
			fmt.Fprintf(&b, "  ... and %d more %s violation(s)\n", n-violationsShown, check)
		}
	}
	return b.String()
}
