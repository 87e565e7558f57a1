package redisio

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// batcher sends the script calls that many actors make at about the same
// time as pipelines: group commit. The first call is sent at once; calls
// that arrive while a pipeline is in flight go together in the next one, so
// N concurrent calls cost a few round trips instead of N, and a lone call
// waits for nothing. Every latched script, renewal, settlement and latch
// deletion goes through one: a single server or Sentinel group has one, a
// Cluster one per master (pipelines go to that master's own client, so a
// slow master delays only its names, and a WAIT can follow the scripts on
// their connection).
//
// Calls come in two shapes. An actor submits its call with a function that
// takes the reply (submit) and goes on with its mailbox; a flusher
// goroutine, started when calls wait and none runs, sends pipeline after
// pipeline until nothing is pending, and each reply goes back through its
// function (which posts it to the actor as a message). A caller that waits
// for its reply (run) sends the pipeline itself when no flush is in
// progress. Calls leave in the order they were queued, so two calls on one
// master run in that order.
type batcher struct {
	c    *Conn
	addr string                // the master's address on a Cluster; "" otherwise
	rdb  redis.UniversalClient // where pipelines go

	mu       sync.Mutex
	pending  []*batchCall
	flushing bool
	closed   bool           // submit and post refuse calls
	posted   sync.WaitGroup // flushers started for submitted and posted calls
}

// batchCall is one script call waiting for its pipeline.
type batchCall struct {
	ctx    context.Context // what the pipeline that carries it is sent with
	script *redis.Script
	keys   []string
	args   []any
	done   chan Reply    // a waiting caller's reply
	then   func(Reply)   // a submitted call's reply; nil otherwise
	lead   chan struct{} // closed when this caller is to send the next pipeline; nil unless it waits
}

// maxBatch bounds one pipeline.
const maxBatch = 1000

// run queues one call and waits for its reply. A caller whose call finds
// no pipeline in flight sends one, with every call pending (its own first);
// then, if calls arrived meanwhile, it hands the sending on to the first of
// them, so no caller sends more than one pipeline and a busy name's actor
// is not kept serving everyone else's.
func (b *batcher) run(ctx context.Context, script *redis.Script, keys []string, args ...any) Reply {
	call := &batchCall{ctx: ctx, script: script, keys: keys, args: args, done: make(chan Reply, 1), lead: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, call)
	lead := !b.flushing
	b.flushing = true
	b.mu.Unlock()
	if !lead {
		select {
		case r := <-call.done:
			return r
		case <-call.lead:
		}
	}
	b.sendNext(false)
	return <-call.done
}

// submit queues a call and returns at once; then receives the reply, on the
// flusher's goroutine, so it must not block (it posts a message). It
// reports false, and then is not called, once close has begun.
func (b *batcher) submit(ctx context.Context, then func(Reply), script *redis.Script, keys []string, args ...any) bool {
	return b.queue(&batchCall{ctx: ctx, script: script, keys: keys, args: args, then: then, done: make(chan Reply, 1)})
}

// post queues a call whose reply nobody waits for: it goes out with the
// next pipeline. After close, posted calls are dropped.
func (b *batcher) post(script *redis.Script, keys []string, args ...any) {
	b.queue(&batchCall{ctx: context.Background(), script: script, keys: keys, args: args, done: make(chan Reply, 1)})
}

// queue adds a call nobody waits on, starting a flusher if none runs.
func (b *batcher) queue(call *batchCall) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.pending = append(b.pending, call)
	if !b.flushing {
		b.flushing = true
		b.startFlusher()
	}
	return true
}

// startFlusher starts a goroutine that sends pipelines while the call at
// the head of the queue has no caller waiting to send it. The caller holds
// b.mu, so no flusher starts once close waits for them.
func (b *batcher) startFlusher() {
	b.posted.Add(1)
	go func() {
		defer b.posted.Done()
		for b.sendNext(true) {
		}
	}()
}

// close drops posted calls from now on and waits, until deadline, for the
// flushers post started.
func (b *batcher) close(deadline time.Time) bool {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return waitUntil(&b.posted, deadline)
}

// sendNext sends one pipeline of what is pending (the sender's own call
// first), then passes the turn to the first call that arrived meanwhile,
// or ends the flush. It reports whether the flusher that called it
// (flusher) is to send the next pipeline too; a waiting caller that sent
// this one starts a flusher instead, so no caller sends more than one.
func (b *batcher) sendNext(flusher bool) (again bool) {
	b.mu.Lock()
	n := min(len(b.pending), maxBatch)
	calls := append([]*batchCall(nil), b.pending[:n]...)
	b.pending = b.pending[n:]
	b.mu.Unlock()
	if len(calls) > 0 {
		b.send(calls[0].ctx, calls, true)
	}
	b.mu.Lock()
	var dropped []*batchCall
	if b.closed {
		// Close has begun: calls nobody waits on are dropped (a submitted
		// one is told), and no flusher may start while Close waits for
		// them.
		kept := b.pending[:0]
		for _, c := range b.pending {
			if c.lead != nil {
				kept = append(kept, c)
			} else if c.then != nil {
				dropped = append(dropped, c)
			}
		}
		b.pending = kept
	}
	switch {
	case len(b.pending) == 0:
		b.flushing = false
	case b.pending[0].lead != nil:
		close(b.pending[0].lead)
	case flusher:
		again = true
	default:
		b.startFlusher()
	}
	b.mu.Unlock()
	for _, c := range dropped {
		c.then(Reply{Err: notSent{ErrClosed}})
	}
	return again
}

// send runs calls as one pipeline of EVALSHA. With replica sync on, one WAIT
// at its end confirms every script in it (WAIT counts the offset of its own
// connection's last write), and a reply is marked Unsynced when too few
// replicas had it. Calls whose script the server does not know yet are
// sent again, once (load is false then), after loading their scripts; a
// call answered MOVED (its slot left this master) goes through the cluster
// client, unsynced.
func (b *batcher) send(ctx context.Context, calls []*batchCall, load bool) {
	t := b.c.targetAt(ctx, b.addr, b.rdb)
	if len(calls) == 1 && t.need == 0 {
		// A lone call: EVALSHA with EVAL fallback, no pipeline.
		c := calls[0]
		b.answer(ctx, c, c.script.Run(ctx, b.rdb, c.keys, c.args...), false)
		return
	}
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	var wait *redis.Cmd
	if t.need > 0 {
		wait = b.c.queueWait(ctx, pipe, t)
	}
	_, _ = pipe.Exec(ctx) // errors are per command
	short := false
	if wait != nil {
		acks, err := waitAcks(wait)
		switch {
		case isUnknownCommand(err):
			b.c.topo.refuse(t.addr, t.aof, err)
		case err != nil || acks < int64(t.need):
			short = true
			b.c.topo.forget(t.addr) // the replica count may have changed
		}
	}
	var again []*batchCall
	for i, c := range calls {
		if load && redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			_ = c.script.Load(ctx, b.rdb).Err()
			again = append(again, c)
			continue
		}
		b.answer(ctx, c, cmds[i], short)
	}
	if len(again) > 0 {
		b.send(ctx, again, false)
	}
}

// answer hands c its reply. A MOVED or ASK reply means the slot has left
// this master (a resharding, a failover): the call goes again through the
// cluster client, which follows the redirection (unsynced, this once), and
// the next call on the key finds its new master.
func (b *batcher) answer(ctx context.Context, c *batchCall, cmd *redis.Cmd, short bool) {
	if isMoved(cmd.Err()) && b.c.topo.cluster != nil {
		b.c.topo.forget(b.addr)
		b.c.topo.cluster.ReloadState(ctx)
		cmd = c.script.Run(ctx, b.c.rdb, c.keys, c.args...)
	}
	r := Reply{Val: cmd.Val(), Err: cmd.Err()}
	r.Unsynced = short && !r.Failed()
	if c.then != nil {
		c.then(r)
		return
	}
	c.done <- r
}

// batcherFor returns the batcher of key's master: the one batcher outside
// a Cluster.
func (c *Conn) batcherFor(ctx context.Context, key string) (*batcher, error) {
	if c.topo.cluster == nil {
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
		b = &batcher{c: c, addr: addr, rdb: m}
		c.masters[addr] = b
	}
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
