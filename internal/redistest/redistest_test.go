package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// noRetry makes failures visible at once instead of being retried away.
func noRetry(o *redis.Options) {
	o.MaxRetries = -1
	o.DialTimeout = 200 * time.Millisecond
	o.ReadTimeout = 200 * time.Millisecond
	o.WriteTimeout = 200 * time.Millisecond
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func mustPing(t *testing.T, c *redis.Client) {
	t.Helper()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
}

func TestServer(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(t *testing.T, s *Server)
	}{
		{"set-get", func(t *testing.T, s *Server) {
			c := s.Client(t)
			mustPing(t, c)
			if err := c.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
				t.Fatalf("SET: %v", err)
			}
			if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
				t.Fatalf("GET = %q, %v; want v", got, err)
			}
			if s.Addr() != fmt.Sprintf("127.0.0.1:%d", s.Port()) {
				t.Fatalf("Addr %q does not match Port %d", s.Addr(), s.Port())
			}
		}},
		{"kill-fails-commands", func(t *testing.T, s *Server) {
			c := s.ClientWith(t, noRetry)
			mustPing(t, c)
			s.Kill(t)
			if err := c.Ping(ctx).Err(); err == nil {
				t.Fatal("PING after Kill succeeded")
			}
			s.Kill(t) // no-op on an exited server
		}},
		{"restart-same-port", func(t *testing.T, s *Server) {
			c := s.Client(t)
			mustPing(t, c)
			port, pid := s.Port(), s.PID()
			s.Kill(t)
			s.Restart(t)
			if s.Port() != port || s.PID() == pid {
				t.Fatalf("after Restart port %d pid %d; want port %d and a new pid (old %d)", s.Port(), s.PID(), port, pid)
			}
			mustPing(t, c)
			if err := c.Get(ctx, "k").Err(); err != nil && !errors.Is(err, redis.Nil) {
				t.Fatalf("GET after Restart: %v", err)
			}
		}},
		{"stop-idempotent-then-restart", func(t *testing.T, s *Server) {
			s.Stop()
			s.Stop()
			s.Restart(t)
			mustPing(t, s.Client(t))
		}},
		{"pause-times-out-resume-works", func(t *testing.T, s *Server) {
			c := s.ClientWith(t, noRetry)
			mustPing(t, c)
			s.Pause(t)
			start := time.Now()
			err := c.Ping(ctx).Err()
			if !isTimeout(err) {
				t.Fatalf("PING while paused: %v; want a timeout", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("PING while paused took %v; want about 200ms", d)
			}
			s.Resume(t)
			mustPing(t, c)
		}},
		{"stop-while-paused", func(t *testing.T, s *Server) {
			s.Pause(t)
			start := time.Now()
			s.Stop()
			if d := time.Since(start); d >= stopTimeout {
				t.Fatalf("Stop of a paused server took %v; SIGTERM should work after SIGCONT", d)
			}
			if err := s.ClientWith(t, noRetry).Ping(ctx).Err(); err == nil {
				t.Fatal("PING after Stop succeeded")
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, Start(t))
		})
	}
}

func TestStartN(t *testing.T) {
	servers := StartN(t, 3)
	if len(servers) != 3 {
		t.Fatalf("StartN(3) returned %d servers", len(servers))
	}
	seen := map[int]bool{}
	for _, s := range servers {
		if seen[s.Port()] {
			t.Fatalf("port %d returned twice", s.Port())
		}
		seen[s.Port()] = true
		mustPing(t, s.Client(t))
	}
}

func TestExtraArgs(t *testing.T) {
	s := Start(t, "--maxmemory", "7mb")
	if s.Embedded() {
		t.Skip("needs a real redis-server: miniredis ignores extra args")
	}
	got, err := s.Client(t).ConfigGet(context.Background(), "maxmemory").Result()
	if err != nil || got["maxmemory"] != "7340032" {
		t.Fatalf("CONFIG GET maxmemory = %v, %v; want 7340032", got, err)
	}
}

func TestEmbeddedFallback(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no redis-server here
	t.Setenv(RequireEnv, "")
	s := Start(t)
	if !s.Embedded() || s.PID() != 0 {
		t.Fatalf("Embedded() = %v, PID() = %d; want the miniredis fallback", s.Embedded(), s.PID())
	}
	c := s.Client(t)
	if err := c.Set(context.Background(), "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET on miniredis: %v", err)
	}
	faults := []struct {
		name string
		fn   func(testing.TB)
	}{{"Kill", s.Kill}, {"Pause", s.Pause}, {"Resume", s.Resume}, {"Restart", s.Restart}}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			defer func() {
				if !t.Skipped() {
					t.Errorf("%s on an embedded server did not skip", f.name)
				}
			}()
			f.fn(t)
		})
	}
}

// fatalTB records Fatalf and ends the goroutine, like testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestRequireRedis(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(RequireEnv, "1")
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(tb)
		t.Error("Start returned without failing")
	}()
	<-done
	if tb.msg == "" {
		t.Fatal("Start did not call Fatalf")
	}
	t.Logf("failure message: %s", tb.msg)
}

func TestLaunchOnTakenPort(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.Embedded() {
		t.Skip("needs a real redis-server: exercises the port-retry path")
	}
	if _, err := b.launch(a.Port()); err == nil {
		t.Fatalf("launch on %s, which is in use, succeeded", a.Addr())
	} else {
		t.Logf("launch on a taken port: %v", err)
	}
	mustPing(t, a.Client(t)) // the other server was not disturbed
}

func TestBadArgsReportLogTail(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("needs a real redis-server: checks its startup log in the failure message")
	}
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(tb, "--no-such-directive", "x")
	}()
	<-done
	if !strings.Contains(tb.msg, "no-such-directive") || !strings.Contains(tb.msg, "redis-server.log") {
		t.Fatalf("failure message lacks the log tail:\n%s", tb.msg)
	}
	t.Logf("failure message: %s", tb.msg)
}
