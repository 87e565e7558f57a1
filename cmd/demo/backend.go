package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/internal/tripcount"
)

// pingTimeout bounds the reachability check of a real server.
const pingTimeout = 2 * time.Second

// backend is the Redis server a scenario runs against and the go-redis
// client connected to it, which counts the commands it sends.
type backend struct {
	rdb      *redis.Client
	desc     string               // e.g. "embedded miniredis at 127.0.0.1:40123"
	mini     *miniredis.Miniredis // nil for a real server
	commands *tripcount.Hook      // its Sent count is the report's Redis commands
}

// openBackend connects to the server opts describes, or starts an embedded
// miniredis when opts is nil. A server that does not answer PING within
// pingTimeout is an error naming its address.
func openBackend(ctx context.Context, opts *redis.Options) (*backend, error) {
	var be *backend
	if opts == nil {
		m, err := startMiniredis()
		if err != nil {
			return nil, err
		}
		be = &backend{rdb: redis.NewClient(&redis.Options{Addr: m.Addr()}), desc: "embedded miniredis at " + m.Addr(), mini: m}
	} else {
		if err := ping(ctx, opts); err != nil {
			return nil, err
		}
		be = &backend{rdb: redis.NewClient(opts), desc: "redis at " + opts.Addr}
	}
	be.commands = new(tripcount.Hook)
	be.rdb.AddHook(be.commands)
	return be, nil
}

// ping sends one PING on a throwaway client and returns an error naming the
// address when it gets no answer. go-redis ignores ctx deadlines on socket
// reads unless ContextTimeoutEnabled is set, and a server that accepts but
// never answers would hold it for the read timeout times the retries; the
// probe sets it so that pingTimeout really bounds the check. The demo's own
// clients keep the user's options untouched.
func ping(ctx context.Context, opts *redis.Options) error {
	probeOpts := *opts
	probeOpts.ContextTimeoutEnabled = true
	probe := redis.NewClient(&probeOpts)
	defer func() { _ = probe.Close() }()

	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	err := probe.Ping(ctx).Err()
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer to PING within %v", pingTimeout)
	}
	if err != nil {
		return fmt.Errorf("cannot reach Redis at %s: %v", opts.Addr, err)
	}
	return nil
}

// startMiniredis starts an in-process miniredis whose TTLs run in real
// time, as on a real server (lock leases and watchdog renewals depend on it).
func startMiniredis() (*miniredis.Miniredis, error) {
	m, err := miniredis.Run()
	if err != nil {
		return nil, fmt.Errorf("cannot start embedded miniredis: %v", err)
	}
	m.ClockTTL(true)
	return m, nil
}

// Close closes the go-redis client, then stops the embedded server if any.
func (b *backend) Close() {
	_ = b.rdb.Close()
	if b.mini != nil {
		b.mini.Close()
	}
}

// errCut is what a node taken down by the demo answers.
var errCut = errors.New("node taken down by the demo")

// cutHook fails every command and dial once cut is set: how the demo takes
// down a real server it does not own.
type cutHook struct{ cut atomic.Bool }

// DialHook fails dials once the node is cut.
func (h *cutHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if h.cut.Load() {
			return nil, errCut
		}
		return next(ctx, network, addr)
	}
}

// ProcessHook fails commands once the node is cut.
func (h *cutHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.cut.Load() {
			cmd.SetErr(errCut)
			return errCut
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook fails pipelines once the node is cut.
func (h *cutHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.cut.Load() {
			for _, cmd := range cmds {
				cmd.SetErr(errCut)
			}
			return errCut
		}
		return next(ctx, cmds)
	}
}

// newClients makes n lockactor Clients on rdb, one per simulated service
// instance.
func newClients(rdb redis.UniversalClient, n int, opts ...lockactor.Option) ([]*lockactor.Client, error) {
	clients := make([]*lockactor.Client, 0, n)
	for range n {
		c, err := lockactor.New(rdb, opts...)
		if err != nil {
			closeAll(clients)
			return nil, fmt.Errorf("lockactor.New: %w", err)
		}
		clients = append(clients, c)
	}
	return clients, nil
}

// closeAll closes every client.
func closeAll(clients []*lockactor.Client) {
	for _, c := range clients {
		_ = c.Close()
	}
}
