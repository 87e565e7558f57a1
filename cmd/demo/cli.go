package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
)

// A scenario is one subcommand's run: its own flags, their validation and
// the run itself.
type scenario interface {
	define(fs *flag.FlagSet)               // registers the scenario's own flags
	check(o *options) error                // validates them after parsing
	run(ctx context.Context, e *env) error // non-nil when the run failed or disproved the guarantee
}

// command describes one subcommand.
type command struct {
	name     string
	summary  string        // one line for `demo help`
	doc      string        // a paragraph for `demo <name> -h`
	common   commonFlag    // which common flags it takes
	duration time.Duration // default of --duration, when it takes one
	new      func() scenario
}

// commonFlag is a set of the flags several subcommands share.
type commonFlag uint8

const (
	flagRedis    commonFlag = 1 << iota // --redis URL
	flagNodes                           // --nodes URL,URL,...
	flagDuration                        // --duration
	flagSeed                            // --seed
	flagTimeline                        // --timeline FILE.html
)

// commands lists the subcommands in help order; the first is the default.
var commands = []*command{
	&contentionCommand, &watchdogCommand, &fairCommand, &rwlockCommand,
	&semaphoreCommand, &permitsCommand, &latchCommand, &fencedCommand, &spinCommand, &redlockCommand,
}

// options holds the parsed common flags.
type options struct {
	redisURL  string
	redisOpts *redis.Options   // parsed --redis; nil for the embedded server
	nodeURLs  string           // raw --nodes
	nodes     []*redis.Options // parsed --nodes; nil for embedded nodes
	duration  time.Duration
	seed      uint64 // 0 on the command line: picked from the clock
	json      bool
	timeline  string // "" for none
}

// pickCommand finds the subcommand named by args[0] (contention when there is
// none or args starts with a flag) and handles `help`. A nil command means
// run is done and should exit with code.
func pickCommand(args []string, stdout, stderr io.Writer) (*command, []string, int) {
	if len(args) == 0 {
		return commands[0], args, 0
	}
	switch a := args[0]; {
	case a == "help":
		if len(args) > 1 {
			if cmd := lookup(args[1]); cmd != nil {
				fs, _ := newFlagSet(cmd, new(options), stdout)
				cmd.usage(fs)
				return nil, nil, 0
			}
			fmt.Fprintf(stderr, "demo: unknown subcommand %q\n", args[1])
			mainUsage(stderr)
			return nil, nil, 2
		}
		mainUsage(stdout)
		return nil, nil, 0
	case a == "-h" || a == "-help" || a == "--help":
		mainUsage(stderr)
		fmt.Fprintf(stderr, "\nflags of %s (the default):\n", commands[0].name)
		fs, _ := newFlagSet(commands[0], new(options), stderr)
		fs.PrintDefaults()
		return nil, nil, 0
	case strings.HasPrefix(a, "-"):
		return commands[0], args, 0
	}
	if cmd := lookup(args[0]); cmd != nil {
		return cmd, args[1:], 0
	}
	fmt.Fprintf(stderr, "demo: unknown subcommand %q\n", args[0])
	mainUsage(stderr)
	return nil, nil, 2
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// mainUsage lists the subcommands.
func mainUsage(w io.Writer) {
	fmt.Fprint(w, "usage: demo [subcommand] [flags]\n\n"+
		"Lock simulations on an embedded Redis, or on yours with --redis URL\n"+
		"(redlock: --nodes URL,URL,...). Subcommands:\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, c := range commands {
		def := ""
		if i == 0 {
			def = " (default)"
		}
		fmt.Fprintf(tw, "  %s\t%s%s\n", c.name, c.summary, def)
	}
	fmt.Fprintf(tw, "  help\tthis list; `demo help <subcommand>` shows its flags\n")
	_ = tw.Flush()
	fmt.Fprint(w, "\nRun `demo <subcommand> -h` for its flags.\n")
}

// usage prints the command's usage with fs's flags.
func (c *command) usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintf(w, "usage: demo %s [flags]\n\n%s\n\nflags:\n", c.name, c.doc)
	fs.PrintDefaults()
}

// newFlagSet makes c's scenario and a flag set, printing to out, with c's
// common flags (parsed into o) and the scenario's own.
func newFlagSet(c *command, o *options, out io.Writer) (*flag.FlagSet, scenario) {
	fs := flag.NewFlagSet("demo "+c.name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { c.usage(fs) }
	if c.common&flagRedis != 0 {
		fs.StringVar(&o.redisURL, "redis", "", "Redis `URL` (redis://host:port/db); default: an embedded miniredis")
	}
	if c.common&flagNodes != 0 {
		fs.StringVar(&o.nodeURLs, "nodes", "", "independent Redis masters, `URL,URL,...` (at least 3); default: embedded miniredis nodes")
	}
	if c.common&flagDuration != 0 {
		fs.DurationVar(&o.duration, "duration", c.duration, "how long to run")
	}
	if c.common&flagSeed != 0 {
		fs.Uint64Var(&o.seed, "seed", 0, "seed of the scenario's random choices (0: from the clock)")
	}
	if c.common&flagTimeline != 0 {
		fs.StringVar(&o.timeline, "timeline", "", "write a timeline of waits and holds to `FILE.html`")
	}
	fs.BoolVar(&o.json, "json", false, "print the results as one JSON object on stdout (the narrative goes to stderr)")
	sc := c.new()
	sc.define(fs)
	return fs, sc
}

// parseFlags parses args for cmd. On error it prints one line and the usage
// to stderr.
func parseFlags(cmd *command, args []string, stderr io.Writer) (scenario, options, error) {
	var o options
	fs, sc := newFlagSet(cmd, &o, stderr)
	if err := fs.Parse(args); err != nil {
		return nil, o, err // fs has printed it, with the usage
	}
	err := o.validate(cmd, fs.Args())
	if err == nil {
		err = sc.check(&o)
	}
	if err != nil {
		fmt.Fprintf(stderr, "demo %s: %v\n", cmd.name, err)
		fs.Usage()
		return nil, o, err
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	return sc, o, nil
}

// validate checks the common flags and parses the URLs.
func (o *options) validate(cmd *command, rest []string) error {
	switch {
	case len(rest) > 0:
		return fmt.Errorf("unexpected argument %q", rest[0])
	case cmd.common&flagDuration != 0 && o.duration <= 0:
		return fmt.Errorf("--duration must be positive, got %v", o.duration)
	}
	if o.redisURL != "" {
		opts, err := redis.ParseURL(o.redisURL)
		if err != nil {
			return fmt.Errorf("--redis %q: %v", o.redisURL, err)
		}
		o.redisOpts = opts
	}
	if o.nodeURLs != "" {
		for _, u := range strings.Split(o.nodeURLs, ",") {
			opts, err := redis.ParseURL(strings.TrimSpace(u))
			if err != nil {
				return fmt.Errorf("--nodes: %q: %v", u, err)
			}
			o.nodes = append(o.nodes, opts)
		}
		if len(o.nodes) < 3 {
			return fmt.Errorf("--nodes needs at least 3 URLs to show a minority and a majority down, got %d", len(o.nodes))
		}
	}
	return nil
}

// atLeast returns an error naming the flag when n < least.
func atLeast(name string, n, least int) error {
	if n < least {
		return fmt.Errorf("--%s must be at least %d, got %d", name, least, n)
	}
	return nil
}

// positiveDur returns an error naming the flag when d <= 0.
func positiveDur(name string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("--%s must be positive, got %v", name, d)
	}
	return nil
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
