// Command demo runs lockactor under contention and checks that it keeps
// mutual exclusion.
//
// It simulates --procs service instances, each with its own lockactor.Client,
// and --goroutines workers per instance. Every worker has its own *Lock
// handle per lock name and loops for --duration: pick a name, Lock, hold the
// critical section for --hold, Unlock. Every critical section is logged with
// its start, end and owner, and the logs are checked for overlaps at the end.
//
// By default it runs against an embedded in-process miniredis; --redis URL
// runs it against a real server instead:
//
//	go run ./cmd/demo
//	go run ./cmd/demo --redis redis://127.0.0.1:6379/0 --procs 4 --duration 10s
//
// Progress goes to stderr once a second, the summary to stdout. Exit status:
// 0 when mutual exclusion held, 1 when it was violated or the run failed
// (Redis unreachable, a lock call failed), 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config holds the parsed flags.
type config struct {
	redisURL   string         // "" for the embedded miniredis
	redisOpts  *redis.Options // parsed from redisURL; nil for the embedded miniredis
	procs      int
	goroutines int
	keys       int
	duration   time.Duration
	hold       time.Duration
	seed       uint64 // 0: picked from the clock by parseFlags
}

// run is the whole program behind main, with its streams and exit status
// made explicit so tests can call it.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2 // parseFlags has printed the error and the usage
	}

	// go-redis logs dial failures to stderr on its own; the demo reports
	// errors itself, once, in plain words.
	redis.SetLogger(quietLogger{})

	// Ctrl-C ends the run early but still prints the summary.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	be, err := openBackend(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	defer be.Close()

	e := &env{cfg: cfg, rdb: be.rdb, backend: be.desc, stdout: stdout, stderr: stderr}
	if err := runContention(ctx, e); err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	return 0
}

// env is what a scenario gets: the flags, one shared go-redis client (each
// simulated instance builds its own lockactor.Client on it) and the streams.
type env struct {
	cfg     config
	rdb     redis.UniversalClient
	backend string // human description of the server, for the summary
	stdout  io.Writer
	stderr  io.Writer
}

// parseFlags parses and validates args. On error it prints one line and the
// usage to stderr.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: demo [flags]\n\n"+
			"Runs simulated service instances that contend for lockactor locks and\n"+
			"checks mutual exclusion. Flags:\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.redisURL, "redis", "", "Redis `URL` (redis://host:port/db); default: an embedded miniredis")
	fs.IntVar(&cfg.procs, "procs", 3, "simulated service instances, each its own lockactor.Client")
	fs.IntVar(&cfg.goroutines, "goroutines", 8, "worker goroutines per instance")
	fs.IntVar(&cfg.keys, "keys", 2, "distinct lock names to contend for")
	fs.DurationVar(&cfg.duration, "duration", 5*time.Second, "how long to run")
	fs.DurationVar(&cfg.hold, "hold", time.Millisecond, "length of each critical section")
	fs.Uint64Var(&cfg.seed, "seed", 0, "seed for the workers' choice of lock names (0: from the clock)")

	if err := fs.Parse(args); err != nil {
		return cfg, err // fs has printed it, with the usage
	}
	if err := cfg.validate(fs.Args()); err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		fs.Usage()
		return cfg, err
	}
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	return cfg, nil
}

// validate checks the flag values and parses --redis.
func (c *config) validate(rest []string) error {
	switch {
	case len(rest) > 0:
		return fmt.Errorf("unexpected argument %q", rest[0])
	case c.procs < 1:
		return fmt.Errorf("--procs must be at least 1, got %d", c.procs)
	case c.goroutines < 1:
		return fmt.Errorf("--goroutines must be at least 1, got %d", c.goroutines)
	case c.keys < 1:
		return fmt.Errorf("--keys must be at least 1, got %d", c.keys)
	case c.duration <= 0:
		return fmt.Errorf("--duration must be positive, got %v", c.duration)
	case c.hold < 0:
		return fmt.Errorf("--hold must not be negative, got %v", c.hold)
	}
	if c.redisURL != "" {
		opts, err := redis.ParseURL(c.redisURL)
		if err != nil {
			return fmt.Errorf("--redis %q: %v", c.redisURL, err)
		}
		c.redisOpts = opts
	}
	return nil
}

// quietLogger discards go-redis's internal log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...interface{}) {}
