package lockactor

import (
	"github.com/lockactor/lockactor/actors"
	"github.com/lockactor/lockactor/redisio"
)

// Test-only views of unexported state, for the package's external tests
// (package lockactor_test) that check what the public API cannot show.

// OwnerOf is the hash field a handle writes: "<clientUUID>:<handleID>".
func OwnerOf(l *Lock) string { return l.owner }

// HoldField is the owner whose hash field Redis keeps the handle's current
// hold under: OwnerOf, or the owner that relayed the hold to it.
func HoldField(l *Lock) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.relayed != "" {
		return l.relayed
	}
	return l.owner
}

// MutexHolder is the handle of m's current hold; nil when nothing is held.
func MutexHolder(m *Mutex) *Lock {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// ActorCount is the number of lock actors (coordinators included) the
// Client's runtime has registered now.
func ActorCount(c *Client) int { return c.rt.Actors() }

// HandoffRun is the longest run of local hand-offs before other processes
// get their chance at a lock.
const HandoffRun = actors.HandoffRun

// WithLatchKeep shortens the life of latch records, so that tests can make
// outages longer than it.
var WithLatchKeep = withLatchKeep

// WithRunTime bounds a run of local hand-offs in time.
var WithRunTime = withRunTime

// WithTokenMemory bounds how many fenced lock names the Client remembers
// the highest token of by name.
var WithTokenMemory = withTokenMemory

// QueuedRW is the number of callers queued in the Client's actor for the
// read-write lock name; QueuedLock for the lock name.
func QueuedRW(c *Client, name string) int { return queued(c, actors.KindRW, name) }

func QueuedLock(c *Client, name string) int { return queued(c, actors.KindLock, name) }

func queued(c *Client, kind actors.Kind, name string) int {
	n := 0
	c.rt.Census(func(k actors.Key, waiters int64) {
		if k.Kind == kind && k.Name == name {
			n = int(waiters)
		}
	})
	return n
}

// ListeningLock reports whether Redis has confirmed the Client's
// subscription to the lock name's channel, and its lock actor has the news
// in its mailbox ahead of anything sent to it after.
func ListeningLock(c *Client, name string) bool {
	return c.rt.Listening(redisio.LockChannel(name))
}
