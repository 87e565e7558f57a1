package torture

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockactor/lockactor/internal/redistest"
)

// denyPublish is FaultDenyPublish on a deployment of several servers: the
// default user loses PUBLISH and SPUBLISH on every node that answers, for
// d, as a managed Redis that restricts pub/sub would have it; then both
// come back on every node that answers by then (a node restarted meanwhile
// came back with them). Every script publishes through publish.lua, whose
// refusal must change nothing else; waiters elsewhere wake by their retry
// timers meanwhile.
func denyPublish(r *runner, nodes func() []*redistest.Server, d time.Duration) string {
	start := time.Now()
	denied, errs := aclAll(nodes(), "-publish", "-spublish")
	r.sleepUntil(start.Add(d))
	// A node that does not answer is down (faults run one at a time, so
	// none is stopped now): it restarts with the default rules.
	if _, back := aclAll(nodes(), "+publish", "+spublish"); len(back) > 0 {
		r.violate(VWorkload, fmt.Sprintf("fault injection: restoring PUBLISH: %v", back))
	}
	return fmt.Sprintf("ACL default -publish -spublish on %d node(s) for %v %v", denied, d, errs)
}

// aclAll applies `ACL SETUSER default <rules>` on every node that answers,
// and says on how many it did and what failed (a node down is skipped).
func aclAll(nodes []*redistest.Server, rules ...string) (int, []string) {
	n := 0
	var errs []string
	args := append([]any{"acl", "setuser", "default"}, anys(rules)...)
	for _, s := range nodes {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		if err := rc.Do(ctx, args...).Err(); isDial(err) {
			// Down: it comes back with the default rules.
		} else if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", s.Addr(), err))
		} else {
			n++
		}
		cancel()
		_ = rc.Close()
	}
	return n, errs
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// isDial reports a connection that could not be made: the node is down.
func isDial(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
