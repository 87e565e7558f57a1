package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"text/tabwriter"
	"time"

	"github.com/lockactor/lockactor"
)

var redlockCommand = command{
	name:    "redlock",
	summary: "RedLock on N nodes: acquired with all up or a minority down, refused with a majority down",
	doc: "Runs a RedLock over --count embedded miniredis nodes (or the independent\n" +
		"masters given with --nodes), each with its own lockactor.Client. It is\n" +
		"acquired with every node up (a second RedLock is refused meanwhile), then\n" +
		"with a minority of nodes down, and refused with a majority down; Validity\n" +
		"is printed each time. Embedded nodes are stopped; real ones are only cut\n" +
		"off from this process. --seed picks which nodes go down.",
	common: flagNodes | flagSeed | flagTimeline,
	new:    func() scenario { return new(redlockDemo) },
}

// redlockDemo is the redlock scenario and its flags.
type redlockDemo struct {
	count int
	lease time.Duration
	hold  time.Duration
}

func (d *redlockDemo) define(fs *flag.FlagSet) {
	fs.IntVar(&d.count, "count", 5, "embedded nodes (ignored with --nodes)")
	fs.DurationVar(&d.lease, "lease", 10*time.Second, "lease of the RedLock (the node Clients' watchdog timeout)")
	fs.DurationVar(&d.hold, "hold", 200*time.Millisecond, "how long each acquisition is held")
}

func (d *redlockDemo) check(*options) error {
	return firstErr(atLeast("count", d.count, 3), positiveDur("lease", d.lease), positiveDur("hold", d.hold))
}

// redlockWait bounds each attempt (WithWait).
const redlockWait = 2 * time.Second

// redlockStep is one attempt.
type redlockStep struct {
	Name     string  `json:"step"`
	Up       int     `json:"nodes_up"`
	Acquired bool    `json:"acquired"`
	Took     float64 `json:"took_seconds"`
	Validity float64 `json:"validity_seconds"`
	Holding  int     `json:"nodes_holding"`
	Refusal  string  `json:"refusal,omitempty"`

	asked, got, released time.Duration
}

// redlockJSON is the --json form of a redlock run.
type redlockJSON struct {
	Scenario      string        `json:"scenario"`
	Nodes         string        `json:"nodes"`
	Quorum        int           `json:"quorum"`
	Lease         float64       `json:"lease_seconds"`
	Seed          uint64        `json:"seed"`
	SecondRefused bool          `json:"second_redlock_refused"`
	Steps         []redlockStep `json:"steps"`
	OK            bool          `json:"ok"`
}

func (d *redlockDemo) run(ctx context.Context, e *env) error {
	nodes, err := openNodes(ctx, e.opts.nodes, d.count, lockactor.WithWatchdogTimeout(d.lease))
	if err != nil {
		return err
	}
	defer closeNodes(nodes)
	n, name := len(nodes), e.key("lock")
	quorum := n/2 + 1
	res := redlockJSON{Scenario: "redlock", Nodes: describeNodes(nodes), Quorum: quorum, Lease: seconds(d.lease), Seed: e.opts.seed}
	e.logf("redlock: %s, quorum %d, lease %v, seed %d", res.Nodes, quorum, d.lease, e.opts.seed)
	order := rand.New(rand.NewPCG(e.opts.seed, 0)).Perm(n)
	var downAt []time.Duration // when each of order[i] went down

	newRedLock := func() *lockactor.RedLock {
		locks := make([]*lockactor.Lock, n)
		for i, nd := range nodes {
			locks[i] = nd.client.Lock(name)
		}
		return lockactor.NewRedLock(locks...)
	}

	e.logf("\n1. all %d nodes up", n)
	step, err := d.attempt(ctx, e, nodes, newRedLock(), "all up", func(ctx context.Context) {
		second := newRedLock()
		ok, err := second.TryLock(ctx)
		res.SecondRefused = !ok && (err == nil || errors.Is(err, lockactor.ErrNoQuorum))
		switch {
		case err != nil:
			e.eventf("a second RedLock: TryLock -> %v", err)
		case ok:
			e.eventf("a second RedLock: TryLock -> ACQUIRED while the first holds")
		default:
			e.eventf("a second RedLock: TryLock -> false (the first holds the nodes)")
		}
		if ok {
			_ = second.Unlock(context.WithoutCancel(ctx))
		}
	})
	if err != nil {
		return err
	}
	res.Steps = append(res.Steps, step)

	for _, phase := range []struct {
		title string
		down  int
	}{{"minority down", (n - 1) / 2}, {"majority down", quorum}} {
		for len(downAt) < phase.down {
			nodes[order[len(downAt)]].takeDown()
			downAt = append(downAt, e.since())
		}
		e.logf("\n%d. a %s: nodes %v %s (%d of %d)", len(res.Steps)+1, phase.title,
			nodeNumbers(order[:phase.down]), nodes[0].downVerb(), phase.down, n)
		step, err := d.attempt(ctx, e, nodes, newRedLock(), phase.title, nil)
		if err != nil {
			return err
		}
		res.Steps = append(res.Steps, step)
	}

	s := res.Steps
	res.OK = s[0].Acquired && res.SecondRefused && s[1].Acquired && !s[2].Acquired && s[2].Holding == 0
	// The timeline runs on for one more hold, so the last refusal and the
	// nodes down are visible.
	if err := e.saveTimeline(d.timeline(res, order, downAt, e.since()+d.hold)); err != nil {
		return err
	}
	if err := e.result(res, func(w io.Writer) { res.print(w) }); err != nil {
		return err
	}
	if !res.OK {
		return errors.New("the RedLock did not behave as the algorithm requires")
	}
	return nil
}

// attempt makes one TryLock on rl and, when it is acquired, runs during (if
// not nil), holds for d.hold and unlocks.
func (d *redlockDemo) attempt(ctx context.Context, e *env, nodes []*node, rl *lockactor.RedLock, title string, during func(context.Context)) (redlockStep, error) {
	st := redlockStep{Name: title}
	for _, nd := range nodes {
		if !nd.down {
			st.Up++
		}
	}
	st.asked = e.since()
	// Rounds until redlockWait runs out: a node slower than the RedLock's
	// 50 ms node timeout (a loaded machine) costs a round, not the step.
	// With a majority down, errors alone refuse it at once.
	ok, err := rl.TryLock(ctx, lockactor.WithWait(redlockWait))
	st.got = e.since()
	st.Took = seconds(st.got - st.asked)
	name := e.key("lock")
	st.Holding = holding(ctx, nodes, name)
	if !ok {
		return st, refused(ctx, e, nodes, &st, err)
	}
	st.Acquired = true
	st.Validity = seconds(rl.Validity())
	e.eventf("TryLock -> acquired in %v on %d of %d nodes; validity %v",
		(st.got - st.asked).Round(time.Microsecond), st.Holding, len(nodes), rl.Validity().Round(time.Millisecond))
	if during != nil {
		during(ctx)
	}
	sleep(ctx, d.hold)
	st.released = e.since()
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
	defer cancel()
	if err := rl.Unlock(uctx); err != nil {
		return st, fmt.Errorf("the RedLock's Unlock: %w", err)
	}
	e.eventf("Unlock -> ok")
	return st, nil
}

func (r redlockJSON) print(w io.Writer) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "step\tnodes up\tresult\tvalidity\tnodes holding\n")
	for _, s := range r.Steps {
		result, validity := "acquired", fmt.Sprintf("%.3fs", s.Validity)
		if !s.Acquired {
			result, validity = "refused", "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\n", s.Name, s.Up, result, validity, s.Holding)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "second RedLock refused while the first held: %v\n", r.SecondRefused)
	fmt.Fprintf(w, "redlock (quorum %d): %s\n", r.Quorum, verdict(r.OK))
}

// refused reports a refused attempt: err (nil, or an ErrNoQuorum listing
// the failed nodes), and the nodes left holding the key once the RedLock has
// given back what it got.
func refused(ctx context.Context, e *env, nodes []*node, st *redlockStep, err error) error {
	if err != nil && !errors.Is(err, lockactor.ErrNoQuorum) {
		return err
	}
	why := "held by another owner"
	st.Refusal = "not acquired: " + why
	if err != nil {
		st.Refusal, why = err.Error(), noQuorumCauses(err)
	}
	e.eventf("TryLock -> refused after %v: %s", (st.got - st.asked).Round(time.Microsecond), why)
	if st.Holding == 0 {
		e.eventf("nodes holding the key: 0")
		return nil
	}
	// A refused RedLock gives back the nodes it got right after answering.
	took, left := cleared(ctx, nodes, e.key("lock"))
	e.eventf("nodes holding the key: %d right after the refusal (being given back), %d after %v",
		st.Holding, left, took.Round(time.Millisecond))
	st.Holding = left
	return nil
}

// nodeNumbers numbers nodes from 1 for people.
func nodeNumbers(idx []int) []int {
	out := make([]int, len(idx))
	for i, x := range idx {
		out[i] = x + 1
	}
	return out
}

// timeline draws the RedLock's attempts and holds, and each node's holds
// and downtime.
func (d *redlockDemo) timeline(r redlockJSON, order []int, downAt []time.Duration, total time.Duration) *timeline {
	n := len(order)
	tl := &timeline{Title: "redlock", Total: total,
		Subtitle: fmt.Sprintf("a RedLock on %d nodes (quorum %d): all up, a minority down, a majority down", n, r.Quorum)}
	rl := tlRow{Label: "the RedLock"}
	for _, s := range r.Steps {
		note := s.Name + ": TryLock"
		if !s.Acquired {
			note += " refused: " + s.Refusal
		}
		rl.Spans = append(rl.Spans, tlSpan{Start: s.asked, End: s.got, Kind: spanWait, Note: note})
		if s.Acquired {
			rl.Spans = append(rl.Spans, tlSpan{Start: s.got, End: s.released, Kind: spanHold, Note: s.Name + ": held"})
		}
	}
	rows := make([]tlRow, n)
	for i := range rows {
		rows[i].Label = fmt.Sprintf("node %d", i+1)
	}
	for i, at := range downAt {
		rows[order[i]].Spans = append(rows[order[i]].Spans, tlSpan{Start: at, End: total, Kind: spanDown, Note: "down"})
	}
	for _, s := range r.Steps {
		if !s.Acquired {
			continue
		}
		for i := range rows {
			if !downBefore(order, downAt, i, s.asked) {
				rows[i].Spans = append(rows[i].Spans, tlSpan{Start: s.got, End: s.released, Kind: spanHold, Note: s.Name + ": holds its key"})
			}
		}
	}
	tl.Rows = append([]tlRow{rl}, rows...)
	return tl
}

// downBefore reports whether node i went down before t.
func downBefore(order []int, downAt []time.Duration, i int, t time.Duration) bool {
	for k, at := range downAt {
		if order[k] == i && at <= t {
			return true
		}
	}
	return false
}
