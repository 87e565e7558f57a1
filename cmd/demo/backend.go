package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// pingTimeout bounds the reachability check of a --redis server.
const pingTimeout = 2 * time.Second

// backend is the Redis server the demo runs against and the go-redis client
// connected to it.
type backend struct {
	rdb  *redis.Client
	desc string               // e.g. "embedded miniredis at 127.0.0.1:40123"
	mini *miniredis.Miniredis // nil for a real server
}

// openBackend connects to cfg's --redis server, or starts an embedded
// miniredis when there is none. A server that does not answer PING within
// pingTimeout is an error naming its address.
func openBackend(ctx context.Context, cfg config) (*backend, error) {
	if cfg.redisOpts == nil {
		return startEmbedded()
	}
	if err := ping(ctx, cfg.redisOpts); err != nil {
		return nil, fmt.Errorf("cannot reach Redis at %s: %v", cfg.redisOpts.Addr, err)
	}
	return &backend{rdb: redis.NewClient(cfg.redisOpts), desc: "redis at " + cfg.redisOpts.Addr}, nil
}

// ping sends one PING on a throwaway client. go-redis ignores ctx deadlines
// on socket reads unless ContextTimeoutEnabled is set, and a server that
// accepts but never answers would hold it for the read timeout times the
// retries; the probe sets it so that pingTimeout really bounds the check. The
// demo's own client keeps the user's options untouched.
func ping(ctx context.Context, opts *redis.Options) error {
	probeOpts := *opts
	probeOpts.ContextTimeoutEnabled = true
	probe := redis.NewClient(&probeOpts)
	defer func() { _ = probe.Close() }()

	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	err := probe.Ping(ctx).Err()
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer to PING within %v", pingTimeout)
	}
	return err
}

// startEmbedded starts an in-process miniredis whose TTLs run in real time,
// as on a real server (lock leases and watchdog renewals depend on it).
func startEmbedded() (*backend, error) {
	m, err := miniredis.Run()
	if err != nil {
		return nil, fmt.Errorf("cannot start embedded miniredis: %v", err)
	}
	m.ClockTTL(true)
	return &backend{
		rdb:  redis.NewClient(&redis.Options{Addr: m.Addr()}),
		desc: "embedded miniredis at " + m.Addr(),
		mini: m,
	}, nil
}

// Close closes the go-redis client, then stops the embedded server if any.
func (b *backend) Close() {
	_ = b.rdb.Close()
	if b.mini != nil {
		b.mini.Close()
	}
}
