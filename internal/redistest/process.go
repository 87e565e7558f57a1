package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var (
	// errNotReady: the process kept running but never answered PING.
	errNotReady = errors.New("redis-server did not answer PING in time")
	// errPortStolen: another process answers on the port we chose.
	errPortStolen = errors.New("port is answered by a process we did not start")
)

// proc is one redis-server process. Exactly one goroutine (in launch) waits
// for it and ends when it exits.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd.Wait has returned
	err  error         // cmd.Wait's result; read only after done is closed
}

// exited reports whether the process has exited and been reaped. A nil proc
// counts as exited.
func (p *proc) exited() bool {
	if p == nil {
		return true
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to our child only. os.Process.Signal uses a pidfd on
// Linux, so it can never hit an unrelated process that reused the pid.
func (p *proc) signal(sig syscall.Signal) error {
	err := p.cmd.Process.Signal(sig)
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

// kill sends SIGKILL and waits until the process is reaped.
func (p *proc) kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	t := time.NewTimer(killTimeout)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		return fmt.Errorf("pid %d still running %v after SIGKILL", p.cmd.Process.Pid, killTimeout)
	}
}

// waitStopped polls /proc until the process is (stopped=true) or is no
// longer (stopped=false) in the stopped state, for up to stopTimeout.
func (p *proc) waitStopped(stopped bool) error {
	path := "/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/stat"
	deadline := time.Now().Add(stopTimeout)
	for {
		b, err := os.ReadFile(path)
		if err != nil || p.exited() {
			return fmt.Errorf("process exited: %v", err)
		}
		// "pid (comm) S ...": the state follows the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i >= 0 && i+2 < len(b) && (b[i+2] == 'T') == stopped {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process state did not become stopped=%v within %v", stopped, stopTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// launch starts redis-server on port and waits until it answers PING. On
// error the process has been killed and reaped.
func (s *Server) launch(port int) (*proc, error) {
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child keeps its own copy
	fmt.Fprintf(logf, "=== redistest: launching on port %d at %s\n", port, time.Now().Format(time.RFC3339Nano))
	args := append([]string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--daemonize", "no", "--protected-mode", "no",
		"--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", "", // log to stdout, i.e. s.log
	}, s.args...)
	if s.conf != "" {
		args = append([]string{s.conf}, args...) // redis-server wants the file first
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf // *os.File: no copying goroutines
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := p.waitReady(addr(port)); err != nil {
		_ = p.kill()
		return nil, fmt.Errorf("port %d: %w", port, err)
	}
	return p, nil
}

// waitReady polls addr until our process answers PING.
func (p *proc) waitReady(addr string) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		if p.exited() {
			return fmt.Errorf("redis-server exited during startup (%v); port taken?", p.err)
		}
		pid, err := probe(addr)
		if err == nil {
			if pid == p.cmd.Process.Pid {
				return nil
			}
			return fmt.Errorf("%w: pid %d, ours is %d", errPortStolen, pid, p.cmd.Process.Pid)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w (%v; last error: %v)", errNotReady, readyTimeout, err)
		}
		time.Sleep(pollInterval)
	}
}

// probe sends PING and INFO server over a raw connection and returns the
// process_id of whoever answered, so a port taken by another server is not
// mistaken for ours.
func probe(addr string) (int, error) {
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(probeTimeout)); err != nil {
		return 0, err
	}
	if _, err := io.WriteString(conn, "PING\r\nINFO server\r\n"); err != nil {
		return 0, err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if line != "+PONG\r\n" {
		return 0, fmt.Errorf("PING replied %q", strings.TrimSpace(line))
	}
	line, err = r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
	if err != nil || !strings.HasPrefix(line, "$") || n < 0 {
		return 0, fmt.Errorf("INFO replied %q", strings.TrimSpace(line))
	}
	info := make([]byte, n)
	if _, err := io.ReadFull(r, info); err != nil {
		return 0, err
	}
	for l := range strings.SplitSeq(string(info), "\r\n") {
		if v, ok := strings.CutPrefix(l, "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

// freePort asks the kernel for a free 127.0.0.1 port. Another program may
// take it before redis-server binds it; callers retry.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// tail returns the last few KiB of the log file, for failure messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	const max = 4 << 10
	if len(b) > max {
		b = b[len(b)-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}
