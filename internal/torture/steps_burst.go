package torture

import (
	"fmt"
	"sync"
	"time"

	"github.com/lockactor/lockactor"
)

// fairBurstStep has several waiters of one Client ask for one FairLock
// name, one after another, while the name is held: this worker takes a
// name of its own (fairb<g>) through a fresh handle, then p.burst
// goroutines of the same Client, each with a fresh handle, call Lock
// p.burstGap apart, and the worker lets go once the last has asked. A fair
// lock grants in the order asked, so CheckFairBursts expects the grants in
// the order the calls began. A fault that keeps a script in flight
// meanwhile (a SIGSTOP, a hook's delay) makes later waiters ask while an
// earlier one's first script is out: the case where the Client's own
// order decides the order in Redis.
func (w *worker) fairBurstStep(p plan) {
	name := fmt.Sprintf("fairb%d", w.rec.g)
	res := "A/" + name
	cl := w.ca
	first := cl.c.FairLock(name)
	owner := w.r.cfg.OwnerOf(first)
	out, ci := w.acquireLock(cl, first, PrimFair, res, owner, shape{op: OpLock}, p.deadlines[0])
	if out != OutOK {
		return
	}
	h := w.grant(first, Hold{Prim: PrimFair, Res: res, Owner: owner}, ci)
	var wg sync.WaitGroup
	for i := 0; i < p.burst; i++ {
		if i > 0 {
			time.Sleep(p.burstGap)
		}
		l := cl.c.FairLock(name)
		deadline := p.deadlines[1+i%5]
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.burstWaiter(p, cl, l, res, deadline)
		}()
	}
	time.Sleep(p.burstGap) // the last one has asked, mostly
	w.release(cl, first, PrimFair, []string{res}, []string{owner}, 1, p, h)
	wg.Wait()
}

// burstWaiter is one waiter of a fair burst: Lock, a short critical
// section, Unlock.
func (w *worker) burstWaiter(p plan, cl *client, l *lockactor.Lock, res string, deadline time.Duration) {
	owner := w.r.cfg.OwnerOf(l)
	out, ci := w.acquireLock(cl, l, PrimFair, res, owner, shape{op: OpLock}, deadline)
	if out != OutOK {
		return
	}
	h := w.grant(l, Hold{Prim: PrimFair, Res: res, Owner: owner}, ci)
	critical(p, shape{lease: 1}) // short
	w.release(cl, l, PrimFair, []string{res}, []string{owner}, 1, p, h)
}
