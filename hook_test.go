package lockactor_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/redistest"
)

// hooked returns a go-redis client of srv with a fresh faultHook on it.
func hooked(t *testing.T, srv *redistest.Server) (*redis.Client, *faultHook) {
	t.Helper()
	hook := &faultHook{}
	rdb := srv.Client(t)
	rdb.AddHook(hook)
	return rdb, hook
}

// errInjected is what a faultHook makes a command fail with.
var errInjected = errors.New("injected fault")

// faultHook is a go-redis hook for targeted faults: each rule picks commands
// by their arguments and fails them before they are sent (refuse), fails
// them after they ran (lose: the reply is lost), or delays them, a number of
// times. It also counts the commands each rule matched.
type faultHook struct {
	mu    sync.Mutex
	rules []*faultRule
}

// faultRule is one targeted fault.
type faultRule struct {
	match  func(args []any) bool
	times  int           // how many more commands to hit; < 0: every one
	refuse bool          // fail without sending
	lose   bool          // send, then fail
	delay  time.Duration // before sending (or, with after, after the reply)
	after  bool          // delay after the reply instead of before sending
	hits   int           // commands matched so far (faulted or not)
}

// add installs r and returns it, to read its hits later.
func (h *faultHook) add(r *faultRule) *faultRule {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rules = append(h.rules, r)
	return r
}

// count returns how many commands r matched so far.
func (h *faultHook) count(r *faultRule) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return r.hits
}

// pick returns the fault to apply to cmd, if any, and counts the match.
func (h *faultHook) pick(cmd redis.Cmder) *faultRule {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.rules {
		if !r.match(cmd.Args()) {
			continue
		}
		r.hits++
		if r.times == 0 {
			return nil
		}
		if r.times > 0 {
			r.times--
		}
		c := *r
		return &c
	}
	return nil
}

func (h *faultHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *faultHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r := h.pick(cmd)
		if r == nil {
			return next(ctx, cmd)
		}
		if r.refuse {
			cmd.SetErr(errInjected)
			return errInjected
		}
		if r.delay > 0 && !r.after {
			time.Sleep(r.delay)
		}
		err := next(ctx, cmd)
		if r.delay > 0 && r.after {
			time.Sleep(r.delay)
		}
		if r.lose {
			cmd.SetErr(errInjected)
			return errInjected
		}
		return err
	}
}

// ProcessPipelineHook applies the rules to each command of a pipeline (the
// runtime pipelines the scripts of concurrent actors): a refused command
// is taken out before sending, a lost one fails after the pipeline ran, and
// the longest delay of any command delays the whole pipeline.
func (h *faultHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var send, lost []redis.Cmder
		var before, after time.Duration
		faulted := false
		for _, cmd := range cmds {
			r := h.pick(cmd)
			switch {
			case r == nil:
				send = append(send, cmd)
				continue
			case r.refuse:
				cmd.SetErr(errInjected)
				faulted = true
				continue
			case r.lose:
				lost = append(lost, cmd)
			}
			if r.after {
				after = max(after, r.delay)
			} else {
				before = max(before, r.delay)
			}
			send = append(send, cmd)
		}
		time.Sleep(before)
		var err error
		if len(send) > 0 {
			err = next(ctx, send)
		}
		time.Sleep(after)
		for _, cmd := range lost {
			cmd.SetErr(errInjected)
			faulted = true
		}
		if err == nil && faulted {
			err = errInjected
		}
		return err
	}
}

// evalOf matches EVALSHA (or EVAL) calls of the script with hash sha.
func evalOf(sha string) func(args []any) bool {
	return func(args []any) bool {
		if len(args) < 2 {
			return false
		}
		name := strings.ToLower(args[0].(string))
		return (name == "evalsha" || name == "eval") && args[1] == sha
	}
}

// stop makes r hit no more commands (it still counts them).
func (h *faultHook) stop(r *faultRule) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r.times = 0
}

// once installs r for the next run of script, after loading the script, so
// that what r does (a lost reply, a late one) belongs to a run of it and
// not to a NOSCRIPT answer; it returns r.
func (h *faultHook) once(t *testing.T, rdb *redis.Client, script *redis.Script, r faultRule) *faultRule {
	t.Helper()
	if err := script.Load(context.Background(), rdb).Err(); err != nil {
		t.Fatal(err)
	}
	r.match, r.times = evalOf(script.Hash()), 1
	return h.add(&r)
}
