package redistest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	proxyDialTimeout = 2 * time.Second // proxy -> target, per accepted connection
	proxyBufSize     = 32 << 10        // bytes read per Read, and held per direction while frozen
)

// Proxy forwards TCP connections from its own 127.0.0.1 port to target, and
// can break them the ways a real network does: black-hole them (Freeze),
// reset them (Cut), or drop a reply after its command ran (CutAfter).
//
// Each connection has two goroutines, one per direction. Each reads a chunk,
// waits while the connection is frozen, then writes the chunk on. The
// client->server goroutine also parses the commands (see cmdParser) to keep
// ConnInfo current and to run CutAfter. A Proxy's methods are safe for
// concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	cancel context.CancelFunc // aborts a dial to target in progress at Close
	ctx    context.Context
	wg     sync.WaitGroup // the accept loop and every pump

	mu        sync.Mutex
	cond      *sync.Cond // broadcast when a held pump may go on: Thaw, a CutAfter command written, a close
	closed    bool
	nextID    int
	conns     map[int]*proxyConn // the live ones
	cutAfters []*cutAfter        // armed, not yet matched, oldest first
}

// ConnInfo describes one proxied connection as the proxy has seen it.
type ConnInfo struct {
	ID         int  // 1, 2, ... in accept order
	Subscriber bool // the client has sent SUBSCRIBE, SSUBSCRIBE or PSUBSCRIBE (stays true after UNSUBSCRIBE)
	Commands   int  // complete commands the client has sent so far (read by the proxy, forwarded or not)
}

// NewProxy listens on a free 127.0.0.1 port and forwards every accepted
// connection to target ("host:port"). tb.Cleanup closes the listener and every
// connection and waits for all of the proxy's goroutines to end.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0") // the kernel picks a free port: never a fixed one
	if err != nil {
		tb.Fatalf("redistest: proxy listen: %v", err)
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{target: target, ln: ln, ctx: ctx, cancel: cancel, conns: map[int]*proxyConn{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.Close)
	return p
}

// Addr returns the proxy's own address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Client returns a go-redis client for Addr with default options, closed in
// tb.Cleanup (which runs before the proxy's own cleanup).
func (p *Proxy) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	return newClient(tb, p.Addr(), nil)
}

// ClientWith is Client with options, as Server.ClientWith.
func (p *Proxy) ClientWith(tb testing.TB, configure func(*redis.Options)) *redis.Client {
	tb.Helper()
	return newClient(tb, p.Addr(), configure)
}

// Close stops accepting, closes every connection and waits until all of the
// proxy's goroutines have ended. It is idempotent; NewProxy's tb.Cleanup
// calls it.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true // from now on no goroutine is added to p.wg
	live := p.snapshot()
	p.mu.Unlock()
	p.cancel()
	_ = p.ln.Close()
	for _, c := range live {
		p.closeConn(c, false)
	}
	p.wg.Wait()
}

// Conns lists the live connections, by ID.
func (p *Proxy) Conns() []ConnInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []ConnInfo
	for _, c := range p.snapshot() {
		out = append(out, c.info)
	}
	return out
}

// Freeze black-holes the live connections for which match returns true: the
// proxy stops forwarding in both directions but keeps both sockets open, so
// the client sees a half-open connection (writes succeed, nothing ever comes
// back). It returns how many connections it froze. New connections are not
// affected. A nil match freezes every live connection.
//
// While frozen, each direction reads at most one more chunk (32 KiB) and
// holds it; later bytes stay in the kernel's socket buffers, which on
// loopback take megabytes, so the peer's writes keep succeeding for any
// test-sized traffic, as over a link that silently drops everything. An EOF
// from either side is held too, so the other side does not learn of it.
func (p *Proxy) Freeze(match func(ConnInfo) bool) int {
	victims := p.matching(match)
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range victims {
		if !c.closed {
			c.frozen = true
			n++
		}
	}
	return n
}

// Thaw resumes forwarding on every frozen connection (bytes held back are
// delivered in order).
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.frozen = false
	}
	p.cond.Broadcast()
}

// Cut closes both sides of the matching live connections at once (like a
// reset: SO_LINGER 0 makes the close send RST, so a blocked read fails with
// "connection reset" rather than a clean EOF). A nil match cuts every live
// connection. It returns how many it cut.
func (p *Proxy) Cut(match func(ConnInfo) bool) int {
	victims := p.matching(match)
	for _, c := range victims {
		p.closeConn(c, true)
	}
	return len(victims)
}

// CutAfter arranges that the next command sent by any client for which pred
// returns true (pred gets the command's arguments, e.g. ["EVALSHA", sha,
// "1", "key", ...]; the command name is upper-cased, the rest is as sent) is
// forwarded to the server, and the connection is then closed as soon as the
// server's reply begins, without forwarding the reply: the command ran but
// the client never learns its result (go-redis then re-sends it on a new
// connection, as it does after EOF). It applies once; it returns a channel
// closed when it has fired.
//
// "The reply begins" means: the first bytes from the server read after the
// command was written. A client that pipelines could still have earlier
// replies (or pub/sub pushes) in flight; those then trigger the cut instead
// and are dropped too. Commands the client sent after the matching one are
// not forwarded. The channel is closed when the connection is closed after
// the command was written (whichever side ended it), before the client can
// see the connection end; if the connection dies before the command was
// written, the CutAfter is re-armed for the next matching command. pred runs
// on the proxy's goroutine with no lock held.
func (p *Proxy) CutAfter(pred func(args []string) bool) <-chan struct{} {
	ca := &cutAfter{pred: pred, fired: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutAfters = append(p.cutAfters, ca)
	return ca.fired
}
