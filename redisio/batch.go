package redisio

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// batcher sends script calls that many actors make at about the same time
// (watchdog renewals, which fire on a shared period) as pipelines: group
// commit. The first call is sent at once; calls that arrive while a pipeline
// is in flight go together in the next one, so a burst of N renewals costs a
// few round trips instead of N, and a lone call waits for nothing.
type batcher struct {
	rdb redis.UniversalClient
	c   *Conn // for replica sync

	mu       sync.Mutex
	pending  []*batchCall
	flushing bool
	closed   bool           // post drops calls
	posted   sync.WaitGroup // flushers started by post
}

// batchCall is one script call waiting for its pipeline.
type batchCall struct {
	script *redis.Script
	keys   []string
	args   []any
	done   chan *redis.Cmd
}

// maxBatch bounds one pipeline.
const maxBatch = 1000

// run queues one call and waits for its reply; the caller whose call finds no
// flush in progress becomes the flusher until the queue is empty.
func (b *batcher) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	call := &batchCall{script: script, keys: keys, args: args, done: make(chan *redis.Cmd, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, call)
	lead := !b.flushing
	b.flushing = true
	b.mu.Unlock()
	if lead {
		b.flush(ctx)
	}
	return <-call.done
}

// post queues a call whose reply nobody waits for: it goes out with the
// next pipeline, sent by a flusher started here if none runs. After close,
// posted calls are dropped.
func (b *batcher) post(script *redis.Script, keys []string, args ...any) {
	call := &batchCall{script: script, keys: keys, args: args, done: make(chan *redis.Cmd, 1)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.pending = append(b.pending, call)
	if !b.flushing {
		b.flushing = true
		b.posted.Add(1)
		go func() {
			defer b.posted.Done()
			b.flush(context.Background())
		}()
	}
}

// close drops posted calls from now on and waits, until deadline, for the
// flushers post started.
func (b *batcher) close(deadline time.Time) bool {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return waitUntil(&b.posted, deadline)
}

// flush sends pipelines until nothing is pending.
func (b *batcher) flush(ctx context.Context) {
	for {
		b.mu.Lock()
		n := min(len(b.pending), maxBatch)
		if n == 0 {
			b.flushing = false
			b.mu.Unlock()
			return
		}
		calls := append([]*batchCall(nil), b.pending[:n]...)
		b.pending = b.pending[n:]
		b.mu.Unlock()
		b.send(ctx, calls)
	}
}

// send runs calls as one pipeline of EVALSHA; a call whose script the server
// does not know yet is run again on its own (EVALSHA, then EVAL). With
// replica sync on (outside a Cluster, whose pipelines go to several
// masters), one WAIT at the end confirms the whole pipeline; a shortfall is
// only logged: a renewal that did not reach a replica still holds on the
// master, and the next renewal tries again.
func (b *batcher) send(ctx context.Context, calls []*batchCall) {
	var t syncTarget
	if b.c != nil && b.c.topo.cluster == nil {
		t = b.c.target(ctx, "")
	}
	if len(calls) == 1 && t.need == 0 {
		c := calls[0]
		c.done <- c.script.Run(ctx, b.rdb, c.keys, c.args...)
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
	if wait != nil {
		if acks, err := waitAcks(wait); isUnknownCommand(err) {
			b.c.topo.refuse(t.addr, t.aof, err)
		} else if acks < int64(t.need) {
			b.c.topo.log.Debug("lockactor: renewals not confirmed by every replica", "acks", acks, "need", t.need, "err", err)
		}
	}
	for i, c := range calls {
		if err := cmds[i].Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			cmds[i] = c.script.Run(ctx, b.rdb, c.keys, c.args...)
		}
		c.done <- cmds[i]
	}
}
