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

// Faults applied to every node of a deployment, each through a client of
// its own that the workload never uses.

// nodeTimeout bounds one command to one node.
const nodeTimeout = 500 * time.Millisecond

// eachNode runs fn on every node in turn with a fresh client (no retries),
// closed after.
func eachNode(nodes []*redistest.Server, fn func(s *redistest.Server, rc *redis.Client)) {
	for _, s := range nodes {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		fn(s, rc)
		_ = rc.Close()
	}
}

// nodeDo runs one command on rc within nodeTimeout.
func nodeDo(rc *redis.Client, args ...any) *redis.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	return rc.Do(ctx, args...)
}

// clientKill kills every normal and pub/sub connection on every answering
// node and says how many.
func clientKill(nodes []*redistest.Server) string {
	n := 0
	var errs []string
	eachNode(nodes, func(s *redistest.Server, rc *redis.Client) {
		for _, typ := range []string{"pubsub", "normal"} {
			k, err := nodeDo(rc, "client", "kill", "type", typ).Int()
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s %s: %v", s.Addr(), typ, err))
			}
			n += k
		}
	})
	return fmt.Sprintf("%d connection(s) killed on %d node(s) %v", n, len(nodes), errs)
}

// denyPublish is FaultDenyPublish: the default user loses PUBLISH and
// SPUBLISH on every node that answers, for d, as a managed Redis that
// restricts pub/sub would have it; then both come back on every node that
// answers by then (a node restarted meanwhile came back with them). Every
// script publishes through publish.lua, whose refusal must change nothing
// else; waiters elsewhere wake by their retry timers meanwhile.
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

// aclAll applies `ACL SETUSER default <rules...>` on every node that
// answers, and says on how many it did and what failed (a node down is
// skipped).
func aclAll(nodes []*redistest.Server, rules ...any) (int, []string) {
	n := 0
	var errs []string
	eachNode(nodes, func(s *redistest.Server, rc *redis.Client) {
		switch err := nodeDo(rc, append([]any{"acl", "setuser", "default"}, rules...)...).Err(); {
		case isDial(err): // down: it comes back with the default rules
		case err != nil:
			errs = append(errs, fmt.Sprintf("%s: %v", s.Addr(), err))
		default:
			n++
		}
	})
	return n, errs
}

// isDial reports a connection that could not be made: the node is down.
func isDial(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
