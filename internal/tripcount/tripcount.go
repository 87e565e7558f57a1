// Package tripcount holds a go-redis hook that counts what a client sends,
// for the tests, the demo and the benchmarks. It lives apart from
// internal/redistest so that the demo binary and the bench module do not
// link the test rig (package testing, redis-server processes).
package tripcount

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Hook is a go-redis hook that counts the commands and pipelines a client
// sends; add it with AddHook. Pub/sub traffic on a dedicated connection
// does not pass through hooks, so it is not counted; a new connection's
// set-up commands (HELLO, CLIENT SETINFO) do, so they are.
type Hook struct {
	Commands  atomic.Int64 // commands sent on their own
	Pipelines atomic.Int64 // pipelines, whatever their length
	Pipelined atomic.Int64 // commands sent inside pipelines
}

// RoundTrips is the number of round trips so far: one per command sent on
// its own and one per pipeline.
func (h *Hook) RoundTrips() int64 { return h.Commands.Load() + h.Pipelines.Load() }

// Sent is the number of commands sent so far, on their own or in pipelines
// (a script is one command).
func (h *Hook) Sent() int64 { return h.Commands.Load() + h.Pipelined.Load() }

// DialHook passes dials through uncounted.
func (h *Hook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts a command sent on its own.
func (h *Hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.Commands.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts a pipeline and the commands in it.
func (h *Hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.Pipelines.Add(1)
		h.Pipelined.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
