package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// nodeSpec describes one process of a multi-process fixture (cluster node,
// replica, sentinel) for startNode.
type nodeSpec struct {
	name string                  // log file is <dir>/<name>-<port>.log
	port func() (int, error)     // picks a candidate port; freePort if nil
	args func(port int) []string // extra args for that port; may be nil
	// conf, if not nil, writes a config file for that port and returns its
	// path, which is passed as the first argument (sentinels need one).
	conf func(port int) (string, error)
}

// startNode launches one redis-server (Server.launch) in dir as spec says,
// retrying with new ports like Start. No tb.Cleanup is registered: the
// fixture that owns the node stops it.
func startNode(bin, dir string, spec nodeSpec) (*Server, error) {
	pick := spec.port
	if pick == nil {
		pick = freePort
	}
	var errs []error
	for range startAttempts {
		port, err := pick()
		if err != nil {
			return nil, err
		}
		s := &Server{bin: bin, dir: dir, log: filepath.Join(dir, fmt.Sprintf("%s-%d.log", spec.name, port))}
		if spec.args != nil {
			s.args = spec.args(port)
		}
		if spec.conf != nil {
			if s.conf, err = spec.conf(port); err != nil {
				return nil, err
			}
		}
		p, err := s.launch(port)
		if err == nil {
			s.port, s.addr, s.p = port, addr(port), p
			return s, nil
		}
		errs = append(errs, err)
		if errors.Is(err, errNotReady) || len(errs) == startAttempts {
			errs = append(errs, fmt.Errorf("--- tail of %s ---\n%s", s.log, tail(s.log)))
			break
		}
	}
	return nil, fmt.Errorf("%s did not start: %w", spec.name, errors.Join(errs...))
}

// needTools finds the named programs on PATH for a fixture that has no
// miniredis fallback. Without them it fails the test when
// LOCKACTOR_REQUIRE_REDIS=1 and skips it otherwise; ok is false if tb's
// Fatalf or Skipf returned instead of ending the goroutine.
func needTools(tb testing.TB, what string, names ...string) (paths []string, ok bool) {
	tb.Helper()
	var errs []error
	for _, n := range names {
		p, err := exec.LookPath(n)
		errs = append(errs, err)
		paths = append(paths, p)
	}
	if err := errors.Join(errs...); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("redistest: %s needs %v on PATH and %s=1 requires them: %v", what, names, RequireEnv, err)
		} else {
			tb.Skipf("needs %v on PATH for %s (there is no miniredis fallback; set %s=1 to fail instead): %v", names, what, RequireEnv, err)
		}
		return nil, false
	}
	return paths, true
}

// haltAll kills servers (SIGKILL, no grace: for fixtures that keep nothing
// on disk) and returns once all have exited.
func haltAll(servers ...*Server) {
	for _, s := range servers {
		if s != nil {
			s.halt()
		}
	}
}

// halt kills the process, paused or not, and waits until it is reaped.
func (s *Server) halt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paused = false
	if !s.p.exited() {
		_ = s.p.kill()
	}
}

// pollStop, returned by a poll check, ends the poll at once with its error.
type pollStop struct{ err error }

func (p *pollStop) Error() string { return p.err.Error() }

// poll calls check every interval until it returns nil or timeout passes,
// and then returns check's last error, prefixed with what and the timeout.
// A *pollStop from check ends it early.
func poll(what string, timeout, interval time.Duration, check func(ctx context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), clusterQueryTimeout)
		err := check(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if stop, ok := err.(*pollStop); ok {
			return fmt.Errorf("%s: %w", what, stop.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not reached after %v: %w", what, timeout, err)
		}
		time.Sleep(interval)
	}
}

// info runs INFO section on a and returns its key:value pairs.
func info(ctx context.Context, a, section string) (map[string]string, error) {
	rc := queryClient(a)
	defer rc.Close()
	s, err := rc.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("%s: INFO %s: %w", a, section, err)
	}
	return parseInfo(s), nil
}
