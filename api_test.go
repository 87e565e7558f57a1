package lockactor_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"github.com/lockactor/lockactor"
)

// The public API the package promises, signature by signature: this file
// stops compiling if a listed name is renamed, dropped or changes shape, or
// if a type stops implementing Locker (which go doc does not show). The list
// is not the whole API: TestAPISurface below checks every exported name.
var (
	_ func(redis.UniversalClient, ...lockactor.Option) (*lockactor.Client, error) = lockactor.New
	_ func(*lockactor.Client) error                                               = (*lockactor.Client).Close
	_ func(*lockactor.Client) string                                              = (*lockactor.Client).ID
	_ func(time.Duration) lockactor.Option                                        = lockactor.WithWatchdogTimeout
	_ func(*slog.Logger) lockactor.Option                                         = lockactor.WithLogger
	_ func(int, time.Duration) lockactor.Option                                   = lockactor.WithReplicaSync
	_ func(metric.MeterProvider) lockactor.Option                                 = lockactor.WithMeterProvider
	_ func(time.Duration, time.Duration) lockactor.Option                         = lockactor.WithSpinBackoff
	_ func(bool) lockactor.Option                                                 = lockactor.WithSpinPublish

	_ func(*lockactor.Client, string) *lockactor.Lock          = (*lockactor.Client).Lock
	_ func(*lockactor.Client, string) *lockactor.Lock          = (*lockactor.Client).FairLock
	_ func(*lockactor.Client, string) *lockactor.Lock          = (*lockactor.Client).FencedLock
	_ func(*lockactor.Client, string) *lockactor.Lock          = (*lockactor.Client).SpinLock
	_ func(*lockactor.Client, string) *lockactor.ReadWriteLock = (*lockactor.Client).ReadWriteLock
	_ func(*lockactor.ReadWriteLock) *lockactor.Lock           = (*lockactor.ReadWriteLock).ReadLock
	_ func(*lockactor.ReadWriteLock) *lockactor.Lock           = (*lockactor.ReadWriteLock).WriteLock

	_ func(time.Duration) lockactor.LockOption = lockactor.WithLease
	_ func(time.Duration) lockactor.LockOption = lockactor.WithWait

	_ lockactor.Locker                       = (*lockactor.Lock)(nil)
	_ lockactor.Locker                       = (*lockactor.Mutex)(nil)
	_ lockactor.Locker                       = (*lockactor.MultiLock)(nil)
	_ lockactor.Locker                       = (*lockactor.RedLock)(nil)
	_ func(lockactor.Locker) <-chan struct{} = lockactor.Locker.Lost

	_ func(*lockactor.Client, string) *lockactor.Mutex                               = (*lockactor.Client).Mutex
	_ func(*lockactor.Mutex) string                                                  = (*lockactor.Mutex).Name
	_ func(*lockactor.Mutex, context.Context, ...lockactor.LockOption) error         = (*lockactor.Mutex).Lock
	_ func(*lockactor.Mutex, context.Context, ...lockactor.LockOption) (bool, error) = (*lockactor.Mutex).TryLock
	_ func(*lockactor.Mutex, context.Context) error                                  = (*lockactor.Mutex).Unlock
	_ func(*lockactor.Mutex) <-chan struct{}                                         = (*lockactor.Mutex).Lost
	_ func(*lockactor.Mutex, context.Context, time.Duration) error                   = (*lockactor.Mutex).Extend
	_ func(*lockactor.MultiLock) <-chan struct{}                                     = (*lockactor.MultiLock).Lost
	_ func(*lockactor.RedLock) <-chan struct{}                                       = (*lockactor.RedLock).Lost

	_ func(*lockactor.Lock) string                                                  = (*lockactor.Lock).Name
	_ func(*lockactor.Lock, context.Context, ...lockactor.LockOption) error         = (*lockactor.Lock).Lock
	_ func(*lockactor.Lock, context.Context, ...lockactor.LockOption) (bool, error) = (*lockactor.Lock).TryLock
	_ func(*lockactor.Lock, context.Context) error                                  = (*lockactor.Lock).Unlock
	_ func(*lockactor.Lock, context.Context, time.Duration) error                   = (*lockactor.Lock).Extend
	_ func(*lockactor.Lock, context.Context) (bool, error)                          = (*lockactor.Lock).ForceUnlock
	_ func(*lockactor.Lock, context.Context) (bool, error)                          = (*lockactor.Lock).IsLocked
	_ func(*lockactor.Lock, context.Context) (bool, error)                          = (*lockactor.Lock).IsHeldByMe
	_ func(*lockactor.Lock, context.Context) (int, error)                           = (*lockactor.Lock).HoldCount
	_ func(*lockactor.Lock, context.Context) (time.Duration, error)                 = (*lockactor.Lock).RemainingLease
	_ func(*lockactor.Lock) <-chan struct{}                                         = (*lockactor.Lock).Lost
	_ func(*lockactor.Lock) uint64                                                  = (*lockactor.Lock).Token

	_ func(*lockactor.Client, string) *lockactor.Semaphore                          = (*lockactor.Client).Semaphore
	_ func(*lockactor.Semaphore) string                                             = (*lockactor.Semaphore).Name
	_ func(*lockactor.Semaphore, context.Context, int) (bool, error)                = (*lockactor.Semaphore).TrySetPermits
	_ func(*lockactor.Semaphore, context.Context, int) error                        = (*lockactor.Semaphore).AddPermits
	_ func(*lockactor.Semaphore, context.Context) (int, error)                      = (*lockactor.Semaphore).AvailablePermits
	_ func(*lockactor.Semaphore, context.Context, int) error                        = (*lockactor.Semaphore).Acquire
	_ func(*lockactor.Semaphore, context.Context, int, time.Duration) (bool, error) = (*lockactor.Semaphore).TryAcquire
	_ func(*lockactor.Semaphore, context.Context, int) error                        = (*lockactor.Semaphore).Release
	_ func(*lockactor.Client, string) *lockactor.CountDownLatch                     = (*lockactor.Client).CountDownLatch
	_ func(*lockactor.CountDownLatch) string                                        = (*lockactor.CountDownLatch).Name
	_ func(*lockactor.CountDownLatch, context.Context, int64) (bool, error)         = (*lockactor.CountDownLatch).TrySetCount
	_ func(*lockactor.CountDownLatch, context.Context) error                        = (*lockactor.CountDownLatch).CountDown
	_ func(*lockactor.CountDownLatch, context.Context) (int64, error)               = (*lockactor.CountDownLatch).Count
	_ func(*lockactor.CountDownLatch, context.Context) error                        = (*lockactor.CountDownLatch).Await

	_ func(*lockactor.Client, string) *lockactor.PermitSemaphore                                            = (*lockactor.Client).PermitSemaphore
	_ func(*lockactor.PermitSemaphore) string                                                               = (*lockactor.PermitSemaphore).Name
	_ func(*lockactor.PermitSemaphore, context.Context, int) (bool, error)                                  = (*lockactor.PermitSemaphore).TrySetPermits
	_ func(*lockactor.PermitSemaphore, context.Context, int) error                                          = (*lockactor.PermitSemaphore).AddPermits
	_ func(*lockactor.PermitSemaphore, context.Context) (int, error)                                        = (*lockactor.PermitSemaphore).AvailablePermits
	_ func(*lockactor.PermitSemaphore, context.Context, time.Duration) (string, error)                      = (*lockactor.PermitSemaphore).Acquire
	_ func(*lockactor.PermitSemaphore, context.Context, time.Duration, time.Duration) (string, bool, error) = (*lockactor.PermitSemaphore).TryAcquire
	_ func(*lockactor.PermitSemaphore, context.Context, string) error                                       = (*lockactor.PermitSemaphore).Release
	_ func(*lockactor.PermitSemaphore, context.Context, string, time.Duration) error                        = (*lockactor.PermitSemaphore).UpdateLease

	_ func(...*lockactor.Lock) *lockactor.MultiLock = lockactor.NewMultiLock
	_ func(...*lockactor.Lock) *lockactor.RedLock   = lockactor.NewRedLock
	_ func(*lockactor.RedLock) time.Duration        = (*lockactor.RedLock).Validity

	_ error = &lockactor.MemberError{Name: "", Err: nil}

	_ = []error{lockactor.ErrNotHeld, lockactor.ErrClosed, lockactor.ErrInvalidArgument, lockactor.ErrNoQuorum, lockactor.ErrNotReplicated,
		lockactor.ErrReleasePending}
)

// apiGolden is the package's exported API as `go doc -all` prints it.
const apiGolden = "testdata/api.golden"

// apiUpdateEnv, set to 1, makes TestAPISurface rewrite apiGolden.
const apiUpdateEnv = "LOCKACTOR_API_UPDATE"

// TestAPISurface compares the package's exported API, as `go doc -all`
// prints it (every exported name, with its signature and doc comment), with
// testdata/api.golden, so that any change to the API, meant or not, fails
// here until the golden file is regenerated and committed with it.
// LOCKACTOR_API_UPDATE=1 regenerates it.
func TestAPISurface(t *testing.T) {
	t.Parallel()
	// go test puts its own toolchain's bin first on PATH, so this is the
	// go command that runs the test. The test runs in the package
	// directory, the repository root.
	cmd := exec.Command("go", "doc", "-all", ".")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go doc -all .: %v\n%s", err, stderr.String())
	}
	got := string(out)
	const regen = "LOCKACTOR_API_UPDATE=1 go test -run TestAPISurface ."
	if os.Getenv(apiUpdateEnv) == "1" {
		if err := os.MkdirAll(filepath.Dir(apiGolden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(apiGolden, out, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d lines): review its diff and commit it", apiGolden, strings.Count(got, "\n"))
		return
	}
	want, err := os.ReadFile(apiGolden)
	if errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s is missing; create it with\n\t%s", apiGolden, regen)
	} else if err != nil {
		t.Fatal(err)
	}
	if w := strings.ReplaceAll(string(want), "\r\n", "\n"); w != got {
		t.Fatalf("the exported API (go doc -all .) differs from %s:\n%s\n"+
			"If the change is meant (a doc comment edit counts, and so does a new Go\n"+
			"release that prints go doc differently), regenerate the golden file with\n"+
			"\t%s\nand commit it with the change.", apiGolden, lineDiff(w, got), regen)
	}
}

// lineDiff lists the lines of want missing from got ("-") and the lines of
// got missing from want ("+"), in order, aligned on a longest common
// subsequence; each run of changes is headed by its line number in want.
func lineDiff(want, got string) string {
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	// lcs[i][j] is the length of a longest common subsequence of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	inRun := false
	for i, j := 0, 0; i < len(a) || j < len(b); {
		if i < len(a) && j < len(b) && a[i] == b[j] {
			i, j, inRun = i+1, j+1, false
			continue
		}
		if !inRun {
			fmt.Fprintf(&out, "@@ %s line %d\n", filepath.Base(apiGolden), i+1)
			inRun = true
		}
		if i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]) {
			fmt.Fprintf(&out, "-%s\n", a[i])
			i++
		} else {
			fmt.Fprintf(&out, "+%s\n", b[j])
			j++
		}
	}
	return out.String()
}
