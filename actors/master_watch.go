package actors

import (
	"context"
	"sync"
	"time"

	"github.com/lockactor/lockactor/redisio"
)

// Which server is master. The runtime has two witnesses: the go-redis
// client's own sentinel, asked on every round (Conn.Master), and every
// sentinel's +switch-master, heard as it is announced (WatchSentinels). The
// client's sentinel can be the last to learn of a failover (sentinels tell
// each other through hellos every 2 s), and until it does the client's pool
// writes to the former master, which takes writes until Sentinel re-points
// it: a torture run granted a lock there 1.1 s after the sentinels had
// named a new master, while another Client held it on the new one. So a
// master named by any sentinel's +switch-master, and saying so itself
// (ROLE), is followed at once: the holds are re-read there, and the Conn's
// commands go there (RouteTo) until the pool reaches it and the client's
// sentinel names it too. The client's sentinel naming the master just left
// is not taken for a switch back, nor is one naming a server that says it
// is a replica: a sentinel stopped through a failover names the former
// master for a few seconds after it resumes, and every dial of the pool
// (the watch's own question included: Conn.Master dials) moves the pool
// back there, where writes fail (READONLY) and scripts that write nothing
// read a stale copy.
// While a switch is followed no hold is relayed (relays): a hold confirmed
// on the former master in the meantime is caught by the next re-read, not
// before.

// masterWatch is what watchMaster knows between its rounds.
type masterWatch struct {
	known   string    // the master last seen
	left    string    // a server the client's sentinel names that is not followed: the master a +switch-master took us off, or one that said it is a replica
	since   time.Time // when the switch being followed was seen; zero: none
	reached bool      // the pool was seen on known: one last read is due
	fast    time.Time // asking every switchCheckFast until then
}

// heardFailover takes a sentinel's news of a failover: a +switch-master's
// new master is kept for the watch's next round, and the watch is nudged
// to ask more often. It never blocks: one pending nudge is enough.
func (rt *Runtime) heardFailover(e redisio.SentinelEvent) {
	if e.Kind == "+switch-master" && e.Master != "" {
		rt.named.Store(&e.Master)
	}
	select {
	case rt.failover <- struct{}{}:
	default:
	}
}

// watchMaster runs while the runtime lives: see the comments at the top of
// this file and of switch.go.
func (rt *Runtime) watchMaster() {
	defer rt.watching.Done()
	tick := make(chan struct{}, 1)
	t := rt.sched.AfterFunc(switchCheckEvery, func() {
		select {
		case tick <- struct{}{}:
		default:
		}
	})
	defer t.Stop()
	var w masterWatch
	for {
		select {
		case <-rt.done:
			return
		case <-tick:
		case <-rt.failover:
			w.fast = rt.sched.Now().Add(switchFastFor)
		}
		if rt.sched.Now().Before(w.fast) {
			t.Reset(switchCheckFast)
		} else {
			t.Reset(switchCheckEvery)
		}
		if w.since.IsZero() && !rt.hasActors() {
			continue // idle: silent (a master named meanwhile waits for the next round)
		}
		ctx, cancel := context.WithTimeout(rt.ctx, 4*switchCheckEvery)
		rt.watchRound(ctx, &w)
		cancel()
		rt.forgetFair(rt.sched.Now().Add(-fairRecent))
	}
}

// watchRound asks which server is master, follows a switch, and routes the
// Conn's commands while the pool lags.
func (rt *Runtime) watchRound(ctx context.Context, w *masterWatch) {
	view := rt.view.ask(rt)
	next := ""
	switch {
	case w.known == "":
		w.known = view // the first answer: nothing to follow
	case view == w.known:
		w.left = "" // the client's sentinel has caught up
	case view != "" && view != w.left:
		// A sentinel resumed after a stop can name, for a few seconds,
		// a master that is a replica by now: follow only a server that
		// says it is master (or that may not be asked: an ACL without
		// ROLE leaves the client's sentinel the only witness). One that
		// says replica is not asked again while the client's sentinel
		// names it (left), rather than once per round.
		switch ok, err := rt.conn.IsMaster(ctx, view); {
		case ok || redisio.Denied(err):
			next = view
		case err == nil:
			w.left = view
		}
	}
	if named := rt.named.Swap(nil); named != nil && *named != w.known && w.known != "" {
		switch ok, err := rt.conn.IsMaster(ctx, *named); {
		case err != nil:
			rt.named.CompareAndSwap(nil, named) // unanswered: ask again next round
		case ok:
			next, w.left = *named, w.known
		}
	}
	if next != "" {
		rt.cfg.Logger.Warn("lockactor: master switched; re-reading holds there", "from", w.known, "to", next)
		w.known, w.since, w.reached = next, rt.sched.Now(), false
		rt.following.Store(true)
	}
	if !w.since.IsZero() {
		final := w.reached || rt.sched.Now().Sub(w.since) > switchFollowMax
		if !w.reached {
			rt.route(ctx, w.known)
		}
		rt.broadcast(&switched{server: w.known, final: final})
		if final {
			w.since = time.Time{}
			rt.following.Store(false)
		} else if view == w.known && rt.poolReaches(ctx, w.known) {
			w.reached = true
			rt.route(ctx, "")
		}
		return
	}
	switch {
	case w.known == "":
	case view != w.known:
		// The client's sentinel names another server, or none: the pool
		// goes where it says at its next dial (ours too: Conn.Master
		// dials), and a sentinel that was stopped through a failover
		// names the former master, a replica by now, until the others'
		// hellos reach it. Commands go to the master followed meanwhile.
		rt.route(ctx, w.known)
	case rt.conn.Routed() != "" && rt.poolReaches(ctx, w.known):
		rt.route(ctx, "")
	}
}

// poolReaches reports whether the client's pool reaches addr; false when
// that cannot be learned.
func (rt *Runtime) poolReaches(ctx context.Context, addr string) bool {
	ok, err := rt.conn.PoolReaches(ctx, addr)
	return err == nil && ok
}

// route sends the Conn's commands to addr ("": through the client's pool).
func (rt *Runtime) route(ctx context.Context, addr string) {
	changed, err := rt.conn.RouteTo(ctx, addr)
	switch {
	case err != nil:
		rt.cfg.Logger.Debug("lockactor: routing commands to the new master failed", "to", addr, "err", err)
	case changed && addr != "":
		rt.cfg.Logger.Warn(LogRouted, "to", addr)
	}
}

// LogRouted is the message of the Warn record logged when the runtime
// starts sending its commands to a new master itself, its client's pool
// being still on the former one; its attribute to is the new master's
// address.
const LogRouted = "lockactor: the client's pool still reaches the former master; sending commands to the new one directly"

// masterView asks the client's own sentinel which server is master, one
// question at a time and off the watch's round: a sentinel that does not
// answer holds a question for go-redis's read timeout (3 s by default,
// whatever ctx says), and the round goes on meanwhile with the last
// answer and the other sentinels' news.
type masterView struct {
	mu     sync.Mutex
	last   string // the last answer; "" before the first
	asking bool
}

// ask returns the last answer and starts the next question if none is
// under way. Only watchMaster calls it: its own count in rt.watching keeps
// the Add here from racing Close's Wait.
func (v *masterView) ask(rt *Runtime) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.asking {
		v.asking = true
		rt.watching.Add(1)
		go func() {
			defer rt.watching.Done()
			ctx, cancel := context.WithTimeout(rt.ctx, 4*switchCheckEvery)
			addr := rt.conn.Master(ctx)
			cancel()
			v.mu.Lock()
			v.last, v.asking = addr, false
			v.mu.Unlock()
		}()
	}
	return v.last
}
