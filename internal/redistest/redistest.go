package redistest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// RequireEnv names the environment variable that, when set to "1", makes
// Start fail the test if redis-server is not on PATH instead of falling back
// to the in-process miniredis.
const RequireEnv = "LOCKACTOR_REQUIRE_REDIS"

const (
	startAttempts  = 5               // fresh ports tried by Start
	readyTimeout   = 5 * time.Second // launch until PING answers
	restartWindow  = 3 * time.Second // Restart retries binding the old port this long
	stopTimeout    = 2 * time.Second // SIGTERM grace before SIGKILL
	killTimeout    = 5 * time.Second // SIGKILL until the process is reaped
	pollInterval   = 5 * time.Millisecond
	probeTimeout   = 250 * time.Millisecond
	restartBackoff = 50 * time.Millisecond
)

// Server is one redis-server started by Start (or, without redis-server on
// PATH, an in-process miniredis). Its methods are safe for concurrent use.
type Server struct {
	bin  string   // redis-server binary
	conf string   // config file given as the first argument, or "" (sentinels)
	args []string // extra args from Start
	dir  string   // --dir, a tb.TempDir()
	log  string   // stdout+stderr of every launch, appended
	port int
	addr string
	mini *miniredis.Miniredis // non-nil for the embedded fallback

	mu     sync.Mutex
	p      *proc // current or last process
	paused bool
}

// Start launches one redis-server on a free 127.0.0.1 port with
// `--save "" --appendonly no` plus extraArgs, waits until it answers PING
// (about 5s at most), and registers tb.Cleanup to Stop it. If another program
// takes the port first, it retries with a new one.
//
// If redis-server is not on PATH, Start fails the test when
// LOCKACTOR_REQUIRE_REDIS=1, and otherwise returns an embedded miniredis
// (TTLs running in real time, extraArgs ignored) and logs that it did.
func Start(tb testing.TB, extraArgs ...string) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("redistest: redis-server is not on PATH and %s=1 requires it: %v", RequireEnv, err)
			return nil
		}
		return startEmbedded(tb, extraArgs)
	}
	dir := tb.TempDir()
	s := &Server{bin: bin, args: extraArgs, dir: dir, log: filepath.Join(dir, "redis-server.log")}
	var errs []error
	for range startAttempts {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("redistest: no free port: %v", err)
			return nil
		}
		p, err := s.launch(port)
		if err == nil {
			s.port, s.addr, s.p = port, addr(port), p
			tb.Cleanup(s.Stop)
			return s
		}
		errs = append(errs, err)
		if errors.Is(err, errNotReady) {
			break // a hang is not a port race; do not wait 5s again
		}
	}
	tb.Fatalf("redistest: redis-server did not start: %v\n--- tail of %s ---\n%s", errors.Join(errs...), s.log, tail(s.log))
	return nil
}

// StartN starts n independent servers (for RedLock tests), each as by Start.
// Their ports are distinct.
func StartN(tb testing.TB, n int) []*Server {
	tb.Helper()
	servers := make([]*Server, n)
	for i := range servers {
		servers[i] = Start(tb)
	}
	return servers
}

func startEmbedded(tb testing.TB, extraArgs []string) *Server {
	tb.Helper()
	m, err := miniredis.Run()
	if err != nil {
		tb.Fatalf("redistest: redis-server is not on PATH and miniredis failed: %v", err)
		return nil
	}
	m.ClockTTL(true) // TTLs follow the wall clock, like a real server
	port, _ := strconv.Atoi(m.Port())
	s := &Server{mini: m, port: port, addr: m.Addr()}
	tb.Cleanup(s.Stop)
	tb.Logf("redistest: redis-server is not on PATH; using in-process miniredis at %s (extra args %q ignored; set %s=1 to fail instead)",
		s.addr, extraArgs, RequireEnv)
	return s
}

// Addr returns "127.0.0.1:port". It does not change across Restart.
func (s *Server) Addr() string { return s.addr }

// Port returns the TCP port. It does not change across Restart.
func (s *Server) Port() int { return s.port }

// Embedded reports whether s is the in-process miniredis fallback.
func (s *Server) Embedded() bool { return s.mini != nil }

// NeedsReal skips the test when s is the miniredis fallback, saying what
// the test needs that the fallback cannot give and how to install a real
// server. Under LOCKACTOR_REQUIRE_REDIS=1 there is no fallback (Start
// fails first), so nothing is skipped.
func (s *Server) NeedsReal(tb testing.TB, what string) {
	tb.Helper()
	if s.Embedded() {
		tb.Skipf("needs a real redis-server (%s); install one with: apt-get install -y redis-server", what)
	}
}

// LogPath returns the file holding redis-server's log (all launches,
// appended), or "" for the embedded fallback.
func (s *Server) LogPath() string { return s.log }

// PID returns the process id of the current (or last) redis-server process,
// or 0 for the embedded fallback.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return 0
	}
	return s.p.cmd.Process.Pid
}

// Client returns a go-redis client for Addr with default options, closed in
// tb.Cleanup (which runs before the server's own cleanup stops it).
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	return s.ClientWith(tb, nil)
}

// ClientWith is Client with options: configure, if not nil, may change any
// field of the options (Addr is preset) before the client is created.
func (s *Server) ClientWith(tb testing.TB, configure func(*redis.Options)) *redis.Client {
	tb.Helper()
	return newClient(tb, s.addr, configure)
}

// newClient is ClientWith for any address (a Server's or a Proxy's).
func newClient(tb testing.TB, addr string, configure func(*redis.Options)) *redis.Client {
	opt := &redis.Options{Addr: addr}
	if configure != nil {
		configure(opt)
	}
	c := redis.NewClient(opt)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill sends SIGKILL to the process and waits until it has exited. Killing
// a server that already exited does nothing.
func (s *Server) Kill(tb testing.TB) {
	tb.Helper()
	s.NeedsReal(tb, "Kill")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p.exited() {
		return
	}
	s.paused = false
	if err := s.p.kill(); err != nil {
		tb.Fatalf("redistest: Kill %s: %v", s.addr, err)
	}
}

// Pause sends SIGSTOP and waits until the kernel reports the process stopped.
// Connections stay open but get no replies until Resume.
func (s *Server) Pause(tb testing.TB) {
	tb.Helper()
	s.signalRunning(tb, "Pause", syscall.SIGSTOP)
}

// Resume sends SIGCONT to a paused server and waits until it runs again.
func (s *Server) Resume(tb testing.TB) {
	tb.Helper()
	s.signalRunning(tb, "Resume", syscall.SIGCONT)
}

// signalRunning sends SIGSTOP or SIGCONT to the running process and waits
// for its state to follow.
func (s *Server) signalRunning(tb testing.TB, what string, sig syscall.Signal) {
	tb.Helper()
	s.NeedsReal(tb, what)
	err := func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.p.exited() {
			return errors.New("the server is not running (Kill or Stop was called)")
		}
		if err := s.p.signal(sig); err != nil {
			return err
		}
		s.paused = sig == syscall.SIGSTOP
		return s.p.waitStopped(s.paused)
	}()
	if err != nil {
		tb.Fatalf("redistest: %s %s: %v", what, s.addr, err)
	}
}

// Restart starts redis-server again on the same port, with the same
// arguments, and waits for PING. It is meant for after Kill or Stop; a
// server still running is stopped first. Data is not preserved. If the port
// is briefly unavailable it retries for a few seconds.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.NeedsReal(tb, "Restart")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
	deadline := time.Now().Add(restartWindow)
	for {
		p, err := s.launch(s.port)
		if err == nil {
			s.p = p
			return
		}
		if errors.Is(err, errNotReady) || time.Now().After(deadline) {
			tb.Fatalf("redistest: Restart on %s: %v\n--- tail of %s ---\n%s", s.addr, err, s.log, tail(s.log))
			return
		}
		time.Sleep(restartBackoff)
	}
}

// Stop shuts the server down: SIGCONT if paused, then SIGTERM, then SIGKILL
// if it has not exited within 2s; it returns once the process is gone.
// Stop is idempotent and is what Start's tb.Cleanup calls.
func (s *Server) Stop() {
	if s.mini != nil {
		s.mini.Close() // idempotent
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.p.exited() {
		return
	}
	if s.paused {
		_ = s.p.signal(syscall.SIGCONT) // a stopped process would hold SIGTERM
		s.paused = false
	}
	_ = s.p.signal(syscall.SIGTERM)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-s.p.done:
	case <-t.C:
		_ = s.p.kill()
	}
}
