// Command demo shows what lockactor's locks do, and checks that they do it,
// in one command with nothing to install: every scenario runs against an
// embedded in-process Redis (miniredis) unless --redis URL (or, for redlock,
// --nodes URL,URL,...) points it at real servers.
//
//	go run ./cmd/demo                   # contention, the default
//	go run ./cmd/demo help              # lists the subcommands
//	go run ./cmd/demo fair -h           # one subcommand's flags
//	go run ./cmd/demo rwlock --timeline rw.html
//	go run ./cmd/demo contention --redis redis://127.0.0.1:6379/0 --json
//
// Subcommands: contention, watchdog, fair, rwlock, semaphore, permits,
// latch, fenced and redlock, one file each. Each prints a narrative and a
// summary on stdout (with --json: one JSON object on stdout, the narrative on
// stderr), and contention, fair, rwlock and redlock can draw their waits and
// holds into a self-contained HTML page (--timeline FILE.html).
//
// Exit status: 0 when the scenario showed its guarantee, 1 when it did not
// or the run failed (Redis unreachable, a lock call failed), 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"

	"github.com/redis/go-redis/v9"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program behind main, with its streams and exit status
// made explicit so tests can call it.
func run(args []string, stdout, stderr io.Writer) int {
	cmd, args, code := pickCommand(args, stdout, stderr)
	if cmd == nil {
		return code
	}
	sc, opts, err := parseFlags(cmd, args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2 // parseFlags has printed the error and the usage
	}
	quietRedisLogs()

	// Ctrl-C ends a run early; scenarios still print what they saw.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	e, err := newEnv(ctx, cmd, opts, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "demo %s: %v\n", cmd.name, err)
		return 1
	}
	defer e.close()
	if err := sc.run(ctx, e); err != nil {
		fmt.Fprintf(stderr, "demo %s: %v\n", cmd.name, err)
		return 1
	}
	return 0
}

var quietOnce sync.Once

// quietRedisLogs stops go-redis from logging dial failures to stderr on its
// own: the demo reports errors itself, once, in plain words.
func quietRedisLogs() {
	quietOnce.Do(func() { redis.SetLogger(quietLogger{}) })
}

// quietLogger discards go-redis's internal log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...interface{}) {}
