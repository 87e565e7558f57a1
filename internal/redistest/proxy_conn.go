package redistest

import (
	"net"
	"slices"
)

// This file holds the proxy's per-connection machinery: the accept loop, the
// two pumps of each connection, CutAfter matching, and closing.

// proxyConn is one client connection and the proxy's connection to target
// for it. The fields after server are guarded by Proxy.mu.
type proxyConn struct {
	client, server net.Conn
	info           ConnInfo
	frozen         bool
	cut            cutState
	ca             *cutAfter // the CutAfter that matched, if cut != cutNone
	closed         bool
}

// cutState tracks a CutAfter on one connection.
type cutState int

const (
	cutNone    cutState = iota
	cutSending          // the matching command is being written to the server
	cutArmed            // it has been written; the next server bytes end the connection
)

// cutAfter is one CutAfter call.
type cutAfter struct {
	pred  func(args []string) bool
	fired chan struct{}
}

// accept runs until Close closes the listener. It dials target once per
// accepted connection, so a connection is only listed once both sides exist.
func (p *Proxy) accept() {
	defer p.wg.Done()
	d := net.Dialer{Timeout: proxyDialTimeout}
	for {
		cc, err := p.ln.Accept()
		if err != nil {
			return // Close closed the listener
		}
		sc, err := d.DialContext(p.ctx, "tcp", p.target)
		if err != nil {
			_ = cc.Close() // the client sees what it would see if target refused
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_, _ = cc.Close(), sc.Close()
			return
		}
		p.nextID++
		c := &proxyConn{client: cc, server: sc, info: ConnInfo{ID: p.nextID}}
		p.conns[c.info.ID] = c
		p.wg.Add(2) // under p.mu, and only while !p.closed: Close's Wait cannot miss it
		p.mu.Unlock()
		go p.pump(c, true)
		go p.pump(c, false)
	}
}

// pump copies one direction of c (up: client->server) until either side
// fails or c is closed, then closes c, which also ends the other pump.
func (p *Proxy) pump(c *proxyConn, up bool) {
	defer p.wg.Done()
	defer p.closeConn(c, false)
	src, dst := c.server, c.client
	if up {
		src, dst = c.client, c.server
	}
	var parser cmdParser
	buf := make([]byte, proxyBufSize)
	for {
		n, err := src.Read(buf)
		chunk := buf[:n]
		if up {
			chunk = p.parse(c, &parser, chunk)
		}
		// Hold the chunk, and the error, while frozen: a black hole also
		// swallows FINs. The server->client side also waits while a CutAfter
		// command is being written, so its reply cannot slip past.
		p.mu.Lock()
		for !c.closed && (c.frozen || !up && c.cut == cutSending) {
			p.cond.Wait()
		}
		open, cut := !c.closed, !up && c.cut == cutArmed && n > 0
		p.mu.Unlock()
		if !open || cut {
			return // for cut, closeConn (deferred) closes c and fires the CutAfter
		}
		if len(chunk) > 0 {
			if _, werr := dst.Write(chunk); werr != nil {
				return
			}
		}
		if up && c.cut == cutSending { // only this goroutine sets cutSending
			p.mu.Lock()
			c.cut = cutArmed
			p.cond.Broadcast()
			p.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// parse feeds a client->server chunk to the parser, updates c.info and
// checks the armed CutAfters. It returns the part of chunk to forward: all
// of it, or up to the end of a command that matched a CutAfter, or nothing
// once one has matched.
func (p *Proxy) parse(c *proxyConn, parser *cmdParser, chunk []byte) []byte {
	cmds := parser.feed(chunk)
	p.mu.Lock()
	already := c.cut != cutNone
	for _, cmd := range cmds {
		c.info.Commands++
		c.info.Subscriber = c.info.Subscriber || isSubscribe(cmd.args[0])
	}
	p.mu.Unlock()
	if already {
		return nil // the connection is doomed; do not run commands the client will never see answered
	}
	for _, cmd := range cmds {
		if ca := p.claim(cmd.args); ca != nil {
			p.mu.Lock()
			c.cut, c.ca = cutSending, ca
			p.mu.Unlock()
			return chunk[:cmd.end]
		}
	}
	return chunk
}

// claim returns the oldest armed CutAfter whose pred accepts args, removed
// from the armed list, or nil. The preds run without p.mu held, so a pred
// may call the proxy's methods.
func (p *Proxy) claim(args []string) *cutAfter {
	p.mu.Lock()
	armed := slices.Clone(p.cutAfters)
	p.mu.Unlock()
	for _, ca := range armed {
		if !ca.pred(args) {
			continue
		}
		p.mu.Lock()
		i := slices.Index(p.cutAfters, ca)
		if i >= 0 {
			p.cutAfters = slices.Delete(p.cutAfters, i, i+1)
		}
		p.mu.Unlock()
		if i >= 0 { // else another connection claimed it meanwhile
			return ca
		}
	}
	return nil
}

// closeConn closes both sockets of c (with RST if reset), once, and settles
// its CutAfter: fired if the command had been forwarded, else re-armed.
func (p *Proxy) closeConn(c *proxyConn, reset bool) {
	p.mu.Lock()
	if c.closed {
		p.mu.Unlock()
		return
	}
	c.closed = true
	delete(p.conns, c.info.ID)
	var fired chan struct{}
	switch c.cut {
	case cutArmed:
		fired = c.ca.fired
	case cutSending:
		p.cutAfters = append([]*cutAfter{c.ca}, p.cutAfters...)
	}
	p.cond.Broadcast() // wake this conn's pumps held by Freeze
	p.mu.Unlock()
	if fired != nil {
		// Before the sockets: a client that has seen its connection end
		// can then rely on the channel being closed already.
		close(fired)
	}
	for _, nc := range []net.Conn{c.client, c.server} {
		if tc, ok := nc.(*net.TCPConn); ok && reset {
			_ = tc.SetLinger(0)
		}
		_ = nc.Close()
	}
}

// snapshot returns the live connections by ID. p.mu must be held.
func (p *Proxy) snapshot() []*proxyConn {
	out := make([]*proxyConn, 0, len(p.conns))
	for _, c := range p.conns {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *proxyConn) int { return a.info.ID - b.info.ID })
	return out
}

// matching returns the live connections match accepts (all if match is
// nil). match runs without p.mu held, on a copy of each ConnInfo.
func (p *Proxy) matching(match func(ConnInfo) bool) []*proxyConn {
	p.mu.Lock()
	live := p.snapshot()
	infos := make([]ConnInfo, len(live))
	for i, c := range live {
		infos[i] = c.info
	}
	p.mu.Unlock()
	var out []*proxyConn
	for i, c := range live {
		if match == nil || match(infos[i]) {
			out = append(out, c)
		}
	}
	return out
}
