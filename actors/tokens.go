package actors

import (
	"container/list"
	"sync"
)

// DefaultTokenMemory is how many fenced lock names a Client remembers the
// highest token of by name (Config.TokenMemory).
const DefaultTokenMemory = 1 << 14

// tokenMemory is a Client's memory of the fencing tokens it has seen, so
// that its tokens for a name never go back when the counter in Redis does
// (a failover that lost acknowledged writes, a restart without
// persistence, a DEL): every fenced acquire sends the highest token seen
// for its name as fenced_lock.lua's floor, and a grant not above it is
// never handed out (lockActor.tokenBehind).
//
// It lives in the Runtime, not in the name's actor, because an actor
// retires when idle and a new one must start from what the old one saw. It
// is bounded: the limit most recently used names are remembered exactly,
// and when one is evicted its highest token is folded into forgotten, the
// floor of every name not remembered. So the promise holds for every name
// however many a Client touches, at the price that after an eviction a
// name that is not remembered gets a token above forgotten, a jump in its
// counter (harmless: tokens must only grow). For a name not remembered,
// forgotten is at least every token the Client saw for it: each evicted
// name's highest token went into it, and a name remembered again starts
// from it.
type tokenMemory struct {
	mu        sync.Mutex
	limit     int
	names     map[string]*list.Element // -> *tokenSeen
	recent    list.List                // of *tokenSeen, most recently used first
	forgotten uint64
}

type tokenSeen struct {
	name string
	top  uint64 // the highest token seen for name
}

func newTokenMemory(limit int) *tokenMemory {
	if limit <= 0 {
		limit = DefaultTokenMemory
	}
	return &tokenMemory{limit: limit, names: make(map[string]*list.Element)}
}

// floor is the highest token the Client has seen for name (forgotten when
// name is not remembered).
func (m *tokenMemory) floor(name string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.names[name]; e != nil {
		m.recent.MoveToFront(e)
		return e.Value.(*tokenSeen).top
	}
	return m.forgotten
}

// saw records token as seen for name and returns the floor name had
// before.
func (m *tokenMemory) saw(name string, token uint64) (before uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.names[name]; e != nil {
		m.recent.MoveToFront(e)
		s := e.Value.(*tokenSeen)
		before, s.top = s.top, max(s.top, token)
		return before
	}
	before = m.forgotten
	m.names[name] = m.recent.PushFront(&tokenSeen{name: name, top: max(token, before)})
	for m.recent.Len() > m.limit {
		s := m.recent.Remove(m.recent.Back()).(*tokenSeen)
		delete(m.names, s.name)
		m.forgotten = max(m.forgotten, s.top)
	}
	return before
}

// remembered is how many names are remembered by name.
func (m *tokenMemory) remembered() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.recent.Len()
}
