package redistest

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// RoundTrips is a go-redis hook that counts what a client sends: single
// commands and pipelines (one round trip each). Add it with AddHook.
type RoundTrips struct {
	Commands  atomic.Int64 // commands sent on their own
	Pipelines atomic.Int64 // pipelines, whatever their length
}

// Total is the number of round trips so far.
func (h *RoundTrips) Total() int64 { return h.Commands.Load() + h.Pipelines.Load() }

// DialHook passes dials through.
func (h *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts a single command.
func (h *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.Commands.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts a pipeline.
func (h *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.Pipelines.Add(1)
		return next(ctx, cmds)
	}
}
