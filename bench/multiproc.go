package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// childFlag is the hidden first argument that makes the tool a worker
// process of the multiproc scenario: `bench -child '<loadSpec JSON>'`.
const childFlag = "-child"

// childProc is one worker process seen from the parent.
type childProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	stderr *bytes.Buffer
}

// runMultiproc runs spec in procs child processes of this executable at
// once, each with its own go-redis client and library instance, and merges
// their results: sums, merged histograms, owners side by side. The critical
// section check uses counters in a file mapped by every child.
func runMultiproc(srv *server, spec loadSpec, procs int) (loadResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return loadResult{}, err
	}
	path, in, err := createSharedInside(max(spec.NKeys, 1))
	if err != nil {
		return loadResult{}, err
	}
	defer os.Remove(path)
	defer in.close()
	spec.Shared = path
	ctx, cancel := context.WithTimeout(context.Background(), spec.Duration+hardLimit+30*time.Second)
	defer cancel()

	var kids []*childProc
	defer func() {
		for _, k := range kids {
			_ = k.stdin.Close()
			_ = k.cmd.Wait()
		}
	}()
	for i := 0; i < procs; i++ {
		spec.Proc = i
		k, err := startChild(ctx, exe, spec)
		if err != nil {
			return loadResult{}, err
		}
		kids = append(kids, k)
	}
	for _, k := range kids {
		if line, err := k.out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
			return loadResult{}, fmt.Errorf("child not ready (%q, %v): %s", line, err, k.stderr)
		}
	}
	st0, err := srv.stats(ctx)
	if err != nil {
		return loadResult{}, err
	}
	start := time.Now().Add(100 * time.Millisecond)
	for _, k := range kids {
		fmt.Fprintf(k.stdin, "go %d\n", start.UnixNano())
	}
	peerDone := make(chan peerResult, 1)
	if spec.Peer {
		rdb, _ := openClient(spec.Addr, spec.PoolSize, spec.Latency)
		defer rdb.Close()
		go func() {
			peerDone <- runPeer(rdb, keyName(spec.Prefix, 0), spec.PeerJava, in, start, start.Add(spec.Duration))
		}()
	}
	merged := loadResult{Seconds: spec.Duration.Seconds(), Wait: &hist{}, Pair: &hist{}}
	for _, k := range kids {
		line, err := k.out.ReadString('\n')
		if err != nil {
			return loadResult{}, fmt.Errorf("child result: %v: %s", err, k.stderr)
		}
		var r loadResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return loadResult{}, fmt.Errorf("child result %q: %v", line, err)
		}
		mergeResult(&merged, &r)
	}
	if spec.Peer {
		p := <-peerDone
		merged.Peer = &p
		merged.Violations += p.Violations
	}
	st1, err := srv.stats(ctx)
	if err != nil {
		return loadResult{}, err
	}
	d := st1.sub(st0)
	merged.ServerCmds, merged.ServerCPU = d.commands, d.cpu
	return merged, nil
}

func startChild(ctx context.Context, exe string, spec loadSpec) (*childProc, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, childFlag, string(b))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	k := &childProc{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = k.stderr
	if k.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	k.out = bufio.NewReaderSize(stdout, 1<<16)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return k, nil
}

// mergeResult adds a process's result r into m.
func mergeResult(m, r *loadResult) {
	m.Acq += r.Acq
	m.Wait.merge(r.Wait)
	m.Pair.merge(r.Pair)
	m.RoundTrips += r.RoundTrips
	m.ClientCPU += r.ClientCPU
	m.PerOwner = append(m.PerOwner, r.PerOwner...)
	m.PerProc = append(m.PerProc, r.Acq)
	m.Violations += r.Violations
	m.GaveUp += r.GaveUp
	m.Errors += r.Errors
	m.Stuck += r.Stuck
	if m.FirstErr == "" {
		m.FirstErr = r.FirstErr
	}
}

// childMain is a worker process: open the library, say "ready", wait for
// "go <unix ns>", run, print the result as one JSON line, exit.
func childMain(args []string) int {
	redis.SetLogger(quietLogger{})
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "child: want one spec argument")
		return 2
	}
	if err := runChild(args[0], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

func runChild(specJSON string, stdin io.Reader, stdout io.Writer) error {
	var spec loadSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return err
	}
	ls, err := findLib(allLibs(spec.Tuning), spec.Lib)
	if err != nil {
		return err
	}
	rdb, hook := openClient(spec.Addr, spec.PoolSize, spec.Latency)
	defer rdb.Close()
	l, err := ls.Open(rdb)
	if err != nil {
		return err
	}
	defer l.Close()
	in, err := openSharedInside(spec.Shared, max(spec.NKeys, 1))
	if err != nil {
		return err
	}
	defer in.close()
	fmt.Fprintln(stdout, "ready")
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil {
		return fmt.Errorf("waiting for go: %w", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "go ")), 10, 64)
	if err != nil {
		return errors.New("bad go line: " + line)
	}
	spec.Start = time.Unix(0, ns)
	res := runLoad(spec, l, hook, in)
	return json.NewEncoder(stdout).Encode(&res)
}
