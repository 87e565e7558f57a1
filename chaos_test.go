//go:build full

package lockactor_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/redistest"
)

// The chaos test runs lock holders as separate OS processes (this test
// binary re-executed with chaosEnv set), kills them with SIGKILL while they
// hold the lock and freezes Redis, and checks a Redis-side log of critical
// sections for overlaps.

const (
	chaosEnv      = "LOCKACTOR_CHAOS_CHILD" // "<redis addr>" in a child process
	chaosLock     = "chaos"
	chaosInside   = "chaos:inside"  // who is in the critical section
	chaosLog      = "chaos:log"     // enter/exit/killed/pause/resume, in Redis order
	chaosClients  = "chaos:clients" // client UUID -> pid
	chaosStop     = "chaos:stop"
	chaosWatchdog = 2 * time.Second
)

// enter and exit are the critical section's Redis side: one script each, so
// the log order is the order Redis saw.
const (
	chaosEnter = `
redis.call('rpush', KEYS[2], 'enter ' .. ARGV[1] .. ' ' .. ARGV[2])
redis.call('set', KEYS[1], ARGV[1])`
	chaosExit = `
if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) end
redis.call('rpush', KEYS[2], 'exit ' .. ARGV[1])`
)

// chaosChild is a child process's whole life: 8 goroutines with their own

func init() { children[chaosEnv] = chaosChild } // a lock-holder process of the chaos test

// fenced handles contend until the parent sets chaosStop.
func chaosChild(addr string) int {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	c, err := lockactor.New(rdb, lockactor.WithWatchdogTimeout(chaosWatchdog))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	ctx := context.Background()
	pid := os.Getpid()
	rdb.HSet(ctx, chaosClients, c.ID(), pid)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := c.FencedLock(chaosLock)
			me := fmt.Sprintf("%d/%d", pid, g)
			for rdb.Exists(ctx, chaosStop).Val() == 0 {
				lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := l.Lock(lctx)
				cancel()
				if err != nil {
					continue // Redis frozen or restarting: try again
				}
				rdb.Eval(ctx, chaosEnter, []string{chaosInside, chaosLog}, me, l.Token())
				time.Sleep(time.Duration(2+rand.IntN(8)) * time.Millisecond)
				rdb.Eval(ctx, chaosExit, []string{chaosInside, chaosLog}, me)
				uctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_ = l.Unlock(uctx)
				cancel()
			}
		}()
	}
	wg.Wait()
	return 0
}

// chaosProc is one child process.
type chaosProc struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	done   chan struct{}
	killed bool
}

func startChaosChild(t *testing.T, addr string) *chaosProc {
	t.Helper()
	p := &chaosProc{done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), chaosEnv+"="+addr)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return p
}

func TestChaosKillHoldersAndFreezeRedis(t *testing.T) {
	// Parallel: its own deployment, and bounds loose enough to share the machine.
	t.Parallel()
	if testing.Short() {
		t.Skip("chaos test runs ~20 s; skipped with -short")
	}
	srv := redistest.Start(t)
	if srv.Embedded() {
		t.Skip("needs a real redis-server: child processes and SIGSTOP")
	}
	rdb := srv.Client(t)
	ctx := ctxFor(t, 2*time.Minute)
	var procs []*chaosProc
	defer func() {
		for _, p := range procs {
			if !p.killed {
				_ = p.cmd.Process.Kill()
			}
			<-p.done
		}
	}()
	byPid := map[int]*chaosProc{}
	spawn := func() {
		p := startChaosChild(t, srv.Addr())
		procs = append(procs, p)
		byPid[p.cmd.Process.Pid] = p
	}
	for i := 0; i < 4; i++ {
		spawn()
	}
	start := time.Now()
	time.Sleep(3 * time.Second)

	// Kill the holder process twice, each time measuring the takeover.
	for kills := 0; kills < 2; {
		owner, pid := chaosHolder(ctx, t, rdb)
		p := byPid[pid]
		if p == nil || p.killed {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		killedAt := time.Now()
		p.killed = true
		rdb.RPush(ctx, chaosLog, fmt.Sprintf("killed %d", pid))
		if now, _ := chaosHolder(ctx, t, rdb); now != owner {
			spawn() // it had just let go: not a holder kill
			continue
		}
		within(t, chaosWatchdog+time.Second, "killed holder's lock taken over", func() bool {
			now, _ := chaosHolder(ctx, t, rdb)
			return now != "" && now != owner
		})
		t.Logf("kill %d: lock taken over %v after SIGKILL of its holder", kills+1, time.Since(killedAt))
		kills++
		spawn()
		time.Sleep(2 * time.Second)
	}

	// Freeze Redis for 2 s, longer than the holders can go unrenewed.
	rdb.RPush(ctx, chaosLog, "pause")
	srv.Pause(t)
	time.Sleep(2 * time.Second)
	srv.Resume(t)
	rdb.RPush(ctx, chaosLog, "resume")

	time.Sleep(time.Until(start.Add(20 * time.Second)))
	rdb.Set(ctx, chaosStop, 1, 0)
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			t.Fatalf("child %d did not stop: %s", p.cmd.Process.Pid, p.out.String())
		}
		if !p.killed && p.cmd.ProcessState.ExitCode() != 0 {
			t.Errorf("child %d exited %d: %s", p.cmd.Process.Pid, p.cmd.ProcessState.ExitCode(), p.out.String())
		}
	}
	chaosVerdict(t, rdb.LRange(ctx, chaosLog, 0, -1).Val())
}

// chaosHolder is the lock's current owner field and the pid of its process.
func chaosHolder(ctx context.Context, t *testing.T, rdb *redis.Client) (string, int) {
	fields, _ := rdb.HKeys(ctx, chaosLock).Result()
	if len(fields) != 1 {
		return "", 0
	}
	id, _, _ := strings.Cut(fields[0], ":") // "<client uuid>:<handle>"
	pid, _ := strconv.Atoi(rdb.HGet(ctx, chaosClients, id).Val())
	return fields[0], pid
}

// chaosVerdict replays the log: an enter while another live holder is inside
// is an overlap. A holder killed inside leaves it empty. Overlaps across the
// Redis freeze are counted apart: a frozen Redis lets leases run out under
// holders that cannot tell (the case fencing tokens exist for).
func chaosVerdict(t *testing.T, log []string) {
	t.Helper()
	var inside string
	var lastToken uint64
	enters, overlaps, acrossFreeze, stale := 0, 0, 0, 0
	frozen := false // between "pause" and the first enter after "resume"
	for _, e := range log {
		f := strings.Fields(e)
		switch f[0] {
		case "enter":
			enters++
			token, _ := strconv.ParseUint(f[2], 10, 64)
			if token <= lastToken {
				stale++
			}
			lastToken = max(lastToken, token)
			if inside != "" {
				if frozen {
					acrossFreeze++
				} else {
					overlaps++
					t.Errorf("overlap: %s entered while %s was inside", f[1], inside)
				}
			}
			inside, frozen = f[1], false
		case "exit":
			if inside == f[1] {
				inside = ""
			}
		case "killed":
			if strings.HasPrefix(inside, f[1]+"/") {
				inside = ""
			}
		case "pause", "resume":
			frozen = true
		}
	}
	t.Logf("%d critical sections, %d overlaps while Redis ran, %d across the freeze, %d enters with a non-increasing token",
		enters, overlaps, acrossFreeze, stale)
	if enters < 100 {
		t.Fatalf("only %d critical sections ran", enters)
	}
	if stale > acrossFreeze {
		t.Fatalf("%d fencing tokens did not increase outside the freeze", stale-acrossFreeze)
	}
}
