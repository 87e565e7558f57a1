package redisio

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/syncx"
)

// batcher sends the script calls that many actors make at about the same
// time as pipelines: group commit. Every latched script, renewal,
// settlement and latch deletion goes through one: a single server or
// Sentinel group has one, a Cluster one per master (pipelines go to that
// master's own client, so a slow master delays only its names, and a WAIT
// can follow the scripts on their connection).
//
// An actor submits its call with a function that takes the reply and goes
// on with its mailbox. One flusher goroutine per batcher sends whatever is
// pending as one pipeline, and as soon as that pipeline's replies are back,
// the calls that arrived meanwhile as the next: a lone call is sent at
// once, and N concurrent calls cost a few round trips instead of N. Each
// reply goes back through its function (which posts it to the actor as a
// message). Calls leave in the order they were queued, so two calls on one
// master run in that order. The flusher waits flusherIdle for more work
// before it exits, so a steady load keeps one goroutine (and its grown
// stack) rather than starting one per pipeline.
type batcher struct {
	c    *Conn
	addr string // the master's address on a Cluster; "" otherwise

	mu  sync.Mutex
	rdb redis.UniversalClient // where pipelines go; replaced when go-redis replaces the node's client
	// gen, on a batcher whose client RouteTo may replace (a FailoverClient's),
	// ends when rdb is replaced: a pipeline still waiting on the client it
	// left (for a connection, which a FailoverClient dials through its
	// sentinel, and a stopped sentinel holds for go-redis's read timeout,
	// again and again) gives up then, rather than keep every later call
	// waiting behind it. nil elsewhere.
	gen       context.Context
	genCancel context.CancelFunc
	pending   []*batchCall
	spare     []*batchCall // the flusher's last batch, emptied: the next pending (no allocation per batch)
	later     []*batchCall // calls to send again at laterDue (batch_retry.go)
	laterDue  time.Time
	flushing  bool           // the flusher runs (sending, or idle and waiting)
	wake      chan struct{}  // tells an idle flusher that calls are pending
	stop      chan struct{}  // closed by close: an idle flusher exits
	closed    bool           // submit and post refuse calls
	flushers  sync.WaitGroup // the flusher, for close
}

// batchCall is one script call waiting for its pipeline.
type batchCall struct {
	ctx    context.Context // what the pipeline that carries it is sent with
	script *redis.Script
	key    string      // its first key: which slot, and so which master
	argv   []any       // EVALSHA's arguments (see evalArgs)
	then   func(Reply) // takes the reply; nil for a post
	// stale, when set, reports that nobody wants the call any more (a
	// renewal of a hold released since it was queued): it is checked as
	// the call's pipeline leaves, and a stale call is not sent.
	stale func() bool

	retry // how often, and since when, it was sent again
}

// maxBatch bounds one pipeline.
const maxBatch = 1000

// flusherIdle is how long the flusher waits for more calls before it exits.
const flusherIdle = time.Second

func newBatcher(c *Conn, addr string, rdb redis.UniversalClient) *batcher {
	return &batcher{c: c, addr: addr, rdb: rdb, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// run queues one call and waits for its reply (for callers that have
// nothing else to do meanwhile).
func (b *batcher) run(call *batchCall) Reply {
	done := make(chan Reply, 1)
	call.then = func(r Reply) { done <- r }
	if !b.queue(call) {
		return Reply{Err: notSent{ErrClosed}}
	}
	return <-done
}

// submit queues a call and returns at once; then receives the reply, on the
// flusher's goroutine, so it must not block (it posts a message). It
// reports false, and then is not called, once close has begun.
func (b *batcher) submit(ctx context.Context, then func(Reply), script *redis.Script, keys []string, args ...any) bool {
	return b.queue(newCall(ctx, script, keys, args, then))
}

// post queues a call whose reply nobody waits for: it goes out with the
// next pipeline. After close, posted calls are dropped.
func (b *batcher) post(script *redis.Script, keys []string, args ...any) {
	b.queue(newCall(context.Background(), script, keys, args, nil))
}

// queue adds a call, starting the flusher if none runs or waking it if it
// is idle.
func (b *batcher) queue(call *batchCall) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.pending = append(b.pending, call)
	b.startLocked()
	return true
}

// startLocked starts the flusher if none runs, or wakes it if it is idle.
// The caller holds b.mu.
func (b *batcher) startLocked() {
	if !b.flushing {
		b.flushing = true
		b.flushers.Add(1)
		go b.flush()
		return
	}
	select {
	case b.wake <- struct{}{}:
	default: // a wake is already pending, or the flusher is sending
	}
}

// flush is the flusher: it sends pipelines while calls are pending, then
// waits up to flusherIdle for more, and exits when none came or close
// began.
func (b *batcher) flush() {
	defer b.flushers.Done()
	idle := time.NewTimer(flusherIdle)
	defer idle.Stop()
	for {
		b.redispatch()
		if calls := b.take(); len(calls) > 0 {
			b.send(calls, 0)
			b.giveBack(calls)
			continue
		}
		idle.Reset(b.idleFor())
		select {
		case <-b.wake:
			continue
		case <-b.stop:
		case <-idle.C:
		}
		b.mu.Lock()
		if len(b.pending)+len(b.later) == 0 || b.closed {
			b.flushing = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
	}
}

// take removes up to maxBatch pending calls, oldest first. Calls on a
// slot that has calls waiting to be sent again wait behind them.
func (b *batcher) take() []*batchCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(len(b.pending), maxBatch)
	var calls []*batchCall
	if n == len(b.pending) {
		calls, b.pending, b.spare = b.pending, b.spare[:0], nil
	} else {
		calls = append(b.spare[:0], b.pending[:n]...)
		b.pending, b.spare = b.pending[n:], nil
	}
	return b.holdBack(calls)
}

// giveBack keeps the slice of a batch that has been sent as the next
// pending one. Nothing refers to the slice any more (answer and again keep
// the calls, not the slice); it is cleared so that it holds no call.
func (b *batcher) giveBack(calls []*batchCall) {
	clear(calls[:cap(calls)])
	b.mu.Lock()
	defer b.mu.Unlock()
	if cap(calls) <= maxBatch {
		b.spare = calls[:0]
	}
}

// close refuses calls from now on, lets the flusher send what is already
// queued (a closing Client's latch deletions among it; calls whose ctx has
// ended are dropped as they leave, see dropStale), and waits, until
// deadline, for it to end (a pipeline in flight ends when go-redis
// returns). Calls still queued then, and those waiting to be sent again,
// are told they were not sent.
func (b *batcher) close(deadline time.Time) bool {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return syncx.WaitUntil(&b.flushers, deadline)
	}
	b.closed = true
	if b.genCancel != nil {
		defer b.genCancel()
	}
	later := b.later
	b.later = nil
	close(b.stop)
	b.mu.Unlock()
	ended := syncx.WaitUntil(&b.flushers, deadline)
	b.mu.Lock()
	dropped := append(later, b.pending...)
	b.pending = nil
	b.mu.Unlock()
	for _, c := range dropped {
		if c.then != nil {
			c.then(Reply{Err: notSent{ErrClosed}})
		}
	}
	return ended
}

// send runs calls as one pipeline of EVALSHA. With replica sync on, one WAIT
// at its end confirms every script in it (WAIT counts the offset of its own
// connection's last write), and a reply is marked Unsynced when too few
// replicas had it. Calls on one slot run in the order they were queued:
// where a slot has calls of different scripts, the first call of each such
// script goes as EVAL, which loads it (a server that lost its cache may
// have some scripts back, through other clients, and not others: a call
// answered NOSCRIPT would otherwise run after a later call that found its
// script). Calls answered NOSCRIPT (their scripts did not run) are sent
// again at once, before any later call: in the first round again, the
// first of each script as EVAL; from the second on, every one as EVAL,
// which cannot be answered NOSCRIPT, so that a cache emptied again and
// again (SCRIPT FLUSH, a switch to a replica that never loaded them, and
// back) still reaches no caller. A call answered TRYAGAIN, MOVED or ASK is
// sent again later (batch_retry.go).
func (b *batcher) send(calls []*batchCall, round int) {
	if calls = b.dropStale(calls); len(calls) == 0 {
		return
	}
	ctx := calls[0].ctx // the pipeline's: the first call still wanted
	rdb, gen := b.clientGen()
	if gen != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(gen, cancel)()
	}
	b.resolvePublish(ctx, calls)
	t := b.c.targetAt(ctx, b.addr, rdb)
	if len(calls) == 1 && t.need == 0 {
		// A lone call: EVALSHA with EVAL fallback, no pipeline.
		c := calls[0]
		cmd := c.run(ctx, rdb)
		b.c.noteReply(cmd.Err())
		b.answer(c, cmd, nil, rdb)
		return
	}
	pipe := rdb.Pipeline()
	var eval map[*redis.Script]bool // scripts whose next call goes as EVAL
	if round == 0 {
		eval = mixedScripts(calls)
	} else {
		eval = distinctScripts(calls)
	}
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		if eval[c.script] || round > 1 {
			delete(eval, c.script)
			cmds[i] = c.eval(ctx, pipe)
			continue
		}
		cmds[i] = c.evalSha(ctx, pipe)
	}
	var wait *redis.Cmd
	if t.need > 0 {
		wait = b.c.queueWait(ctx, pipe, t)
	}
	_, _ = pipe.Exec(ctx)        // errors are per command
	b.c.noteReply(cmds[0].Err()) // a broken connection fails them all alike
	var short error              // why the pipeline counts as unconfirmed
	if wait != nil {
		acks, err := waitAcks(wait)
		switch {
		case b.c.waitRefused(t, err):
		case err != nil:
			short = fmt.Errorf("WAIT on %s: %w", t.addr, err)
		case acks < int64(t.need):
			short = fmt.Errorf("%d of %d replicas of %s acknowledged", acks, t.need, t.addr)
		}
		if short != nil {
			b.c.topo.forget(t.addr) // the replica count may have changed
		}
	}
	var again []*batchCall
	for i, c := range calls {
		if redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			again = append(again, c)
			continue
		}
		b.answer(c, cmds[i], short, rdb)
	}
	if len(again) > 0 {
		b.send(again, round+1)
	}
}

// ErrStale is the error of a call that was not sent because it had become
// stale (see batchCall.stale).
var ErrStale = errors.New("lockactor: call not sent: no longer wanted")

// dropStale answers the calls that have become stale, or whose ctx has
// ended (their Client is closing), without sending them, and returns the
// others, in order (in calls' own array).
func (b *batcher) dropStale(calls []*batchCall) []*batchCall {
	kept := calls[:0]
	for _, c := range calls {
		var why error
		switch {
		case c.stale != nil && c.stale():
			why = ErrStale
		case c.ctx.Err() != nil:
			why = c.ctx.Err()
		}
		if why != nil {
			if c.then != nil {
				c.then(Reply{Err: notSent{why}})
			}
			continue
		}
		kept = append(kept, c)
	}
	clear(calls[len(kept):])
	return kept
}

// mixedScripts is the set of scripts of the calls on slots that carry more
// than one script in this pipeline.
func mixedScripts(calls []*batchCall) map[*redis.Script]bool {
	if len(calls) < 2 {
		return nil
	}
	first := make(map[int]*redis.Script, len(calls))
	mixed := map[int]bool{}
	for _, c := range calls {
		slot := SlotOf(c.key)
		if s, ok := first[slot]; !ok {
			first[slot] = c.script
		} else if s != c.script {
			mixed[slot] = true
		}
	}
	if len(mixed) == 0 {
		return nil
	}
	var on []*batchCall
	for _, c := range calls {
		if mixed[SlotOf(c.key)] {
			on = append(on, c)
		}
	}
	return distinctScripts(on)
}

// distinctScripts is the set of the calls' scripts.
func distinctScripts(calls []*batchCall) map[*redis.Script]bool {
	out := make(map[*redis.Script]bool, len(calls))
	for _, c := range calls {
		out[c.script] = true
	}
	return out
}

// resolvePublish replaces publishLater in the calls' arguments with the
// publish command, asking the servers first if that is not settled yet:
// here, on the flusher's goroutine, only this master's pipeline waits, and
// at most probeWait.
func (b *batcher) resolvePublish(ctx context.Context, calls []*batchCall) {
	cmd := ""
	for _, c := range calls {
		for i, a := range c.argv {
			if _, ok := a.(publishLater); ok {
				if cmd == "" {
					cmd = publishName(b.c.topo.Sharded(ctx))
				}
				c.argv[i] = cmd
			}
		}
	}
}

// answer hands c its reply, unless the reply proves that c did not run and
// a later try can succeed (see retryable): then c is sent again later, to
// its slot's master then (with that master's WAIT).
func (b *batcher) answer(c *batchCall, cmd *redis.Cmd, short error, rdb redis.UniversalClient) {
	r := Reply{Val: cmd.Val(), Err: cmd.Err()}
	if r.Err == nil && r.Val == LatchNil {
		r = Reply{Err: redis.Nil}
	}
	if b.again(c, r, rdb) {
		return
	}
	if short != nil && !r.Failed() {
		r.Unsynced, r.SyncErr = true, short
	}
	if c.then != nil {
		c.then(r)
	}
}

// batcherFor returns the batcher of key's master: the one batcher outside
// a Cluster, and while RouteTo sends every command to one server (a
// FailoverClusterClient: a real Cluster is never routed, and its calls
// skip the question).
func (c *Conn) batcherFor(ctx context.Context, key string) (*batcher, error) {
	if c.topo.cluster == nil || !c.topo.real && c.Routed() != "" {
		return c.batch, nil
	}
	m, err := c.topo.cluster.MasterForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	addr := m.Options().Addr
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.masters[addr]
	if b == nil {
		b = newBatcher(c, addr, m)
		c.masters[addr] = b
		return b, nil
	}
	b.setClient(m)
	return b, nil
}

// batchers returns every batcher, for Close.
func (c *Conn) batchers() []*batcher {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []*batcher{c.batch}
	for _, b := range c.masters {
		out = append(out, b)
	}
	return out
}
