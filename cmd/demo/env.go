package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// keyPrefix keeps the demo's keys apart from other keys on a shared server.
const keyPrefix = "lockactor-demo:"

// env is what a scenario gets: the common flags, the server (nil for
// redlock, which opens its own nodes) and the streams.
type env struct {
	cmd    string
	opts   options
	be     *backend
	stdout io.Writer
	stderr io.Writer
	out    io.Writer // the narrative: stdout, or stderr under --json
	runID  string    // random, in every key name, so runs never share keys
	start  time.Time // of the scenario, for the narrative's timestamps
}

// newEnv opens the server cmd runs against, when it takes --redis.
func newEnv(ctx context.Context, cmd *command, o options, stdout, stderr io.Writer) (*env, error) {
	e := &env{cmd: cmd.name, opts: o, stdout: stdout, stderr: stderr, out: stdout, runID: newRunID(), start: time.Now()}
	if o.json {
		e.out = stderr
	}
	if cmd.common&flagRedis != 0 {
		be, err := openBackend(ctx, o.redisOpts)
		if err != nil {
			return nil, err
		}
		e.be = be
	}
	return e, nil
}

// close closes the server, if any.
func (e *env) close() {
	if e.be != nil {
		e.be.Close()
	}
}

// newRunID returns 8 random hex digits.
func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// key returns a key name for this run: lockactor-demo:<cmd>:<runID>:<suffix>.
func (e *env) key(suffix string) string {
	return keyPrefix + e.cmd + ":" + e.runID + ":" + suffix
}

// backendDesc describes the server for summaries.
func (e *env) backendDesc() string {
	if e.be == nil {
		return ""
	}
	return e.be.desc
}

// logf prints one narrative line.
func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(e.out, format+"\n", args...)
}

// eventf prints one narrative line stamped with the time since the
// scenario began.
func (e *env) eventf(format string, args ...any) {
	fmt.Fprintf(e.out, "  %7.3fs  %s\n", time.Since(e.start).Seconds(), fmt.Sprintf(format, args...))
}

// since is the time since the scenario began.
func (e *env) since() time.Duration { return time.Since(e.start) }

// result prints the scenario's result: res as JSON on stdout under --json,
// human(stdout) otherwise.
func (e *env) result(res any, human func(w io.Writer)) error {
	if !e.opts.json {
		human(e.stdout)
		return nil
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// saveTimeline writes tl to the --timeline file, if one was asked for.
func (e *env) saveTimeline(tl *timeline) error {
	if e.opts.timeline == "" {
		return nil
	}
	f, err := os.Create(e.opts.timeline)
	if err != nil {
		return fmt.Errorf("--timeline: %v", err)
	}
	if err := tl.writeHTML(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("--timeline %s: %v", e.opts.timeline, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--timeline %s: %v", e.opts.timeline, err)
	}
	fmt.Fprintf(e.stderr, "timeline written to %s\n", e.opts.timeline)
	return nil
}

// seconds is a duration in seconds, for JSON results.
func seconds(d time.Duration) float64 { return d.Seconds() }

// ms formats d in milliseconds with two decimals.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// verdict formats a check: "OK" or "FAILED".
func verdict(ok bool) string {
	if ok {
		return "OK"
	}
	return "FAILED"
}
