package torture

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// permitStep takes one permit of a PermitSemaphore of the current
// generation with a lease (short, long or, rarely, tiny, as a
// lock's fixed lease: see drawPlan), sometimes moves its lease
// (UpdateLease), keeps it for a critical section that now and then
// outlasts the lease, and releases it by id. A permit whose lease ran out
// is Redis's to give back, not its holder's: the hold's span ends at the
// lease, and the Release may answer ErrNotHeld (judged like an Unlock's).
// After a restart of the server the Release finds no permit either; unlike
// a Semaphore's, it cannot mint one, so it is made all the same.
func (w *worker) permitStep(p plan) {
	name := fmt.Sprintf("permit%d.g%d", p.name, w.r.gen.Load())
	res := "A/" + name
	ps := w.ca.c.PermitSemaphore(name)
	c := Call{Client: w.ca.name, Prim: PrimPermit, Res: []string{res}, N: 1, Op: OpAcquire, Lease: p.lease, Waiting: true}
	cancel := acquireShape(p, &c)
	c.Waiting = c.Waiting && !tinyLease(c.Lease)
	var id string
	cc := newCallCtx(p.deadlines[0], cancel)
	out, ci := w.rec.do(c, cc, func(ctx context.Context) (ok bool, err error) {
		if c.Op == OpAcquire {
			id, err = ps.Acquire(ctx, c.Lease)
			return err == nil, err
		}
		id, ok, err = ps.TryAcquire(ctx, c.Lease, c.Wait)
		return ok, err
	})
	cc.done()
	if out != OutOK {
		return
	}
	w.rec.setOwners(ci, id)
	h := w.rec.open(Hold{Prim: PrimPermit, Res: res, Owner: id}, ci, nil)
	if p.extend {
		u := Call{Client: w.ca.name, Prim: PrimPermit, Op: OpUpdateLease, Res: []string{res}, Owners: []string{id}, N: 1, Lease: p.extendLease}
		uc := newCallCtx(p.deadlines[5], 0)
		_, ui := w.rec.do(u, uc, func(ctx context.Context) (bool, error) { return true, ps.UpdateLease(ctx, id, u.Lease) })
		uc.done()
		h.extended(ui)
	}
	critical(p, shape{})
	h.end(false)
	rc := newCallCtx(p.deadlines[3], 0)
	_, ri := w.rec.do(Call{Client: w.ca.name, Prim: PrimPermit, Op: OpRelease, Res: []string{res}, Owners: []string{id}, N: 1}, rc,
		func(ctx context.Context) (bool, error) { return true, ps.Release(ctx, id) })
	rc.done()
	h.released(ri)
}

// latchAwait is how long an awaiter of a latch round waits at most, on top
// of one of the plan's deadlines: longer than a round takes without faults.
const latchAwait = time.Second

// latchStep is one round of a CountDownLatch on a name of its own: this
// worker sets the count (1-3), 1-3 goroutines await it through other
// Clients of the server (one in four rounds, one of them gives up early),
// and this worker counts down through the Clients in turn until as many
// CountDowns as the count returned OK (two more tries at most), pausing
// before the last so that an Await let go early shows in the log. What
// the checker asks of a round is in CheckLatches.
func (w *worker) latchStep(p plan) {
	w.latches++
	name := fmt.Sprintf("cdl%d.%d", w.rec.g, w.latches)
	res := "A/" + name
	cls := w.r.byServer["A"]
	via := func(i int) *client { return cls[(w.rec.g+i)%len(cls)] }
	n := p.latchCount
	sc := newCallCtx(p.deadlines[0], 0)
	out, _ := w.rec.do(Call{Client: w.ca.name, Prim: PrimLatch, Op: OpSetCount, Res: []string{res}, N: n}, sc,
		func(ctx context.Context) (bool, error) { return w.ca.c.CountDownLatch(name).TrySetCount(ctx, int64(n)) })
	sc.done()
	if out != OutOK {
		return
	}
	var wg sync.WaitGroup
	for i := 0; i < p.awaiters; i++ {
		a := via(1 + i)
		var giveUp time.Duration
		if i == 0 && p.awaitGivesUp {
			giveUp = p.cancel
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ac := newCallCtx(latchAwait+p.deadlines[2+i], giveUp)
			defer ac.done()
			w.rec.do(Call{Client: a.name, Prim: PrimLatch, Op: OpAwait, Res: []string{res}}, ac,
				func(ctx context.Context) (bool, error) {
					err := a.c.CountDownLatch(name).Await(ctx)
					return err == nil, err
				})
		}()
	}
	time.Sleep(p.crit) // the awaiters' calls under way, mostly
	oks := 0
	for tries := 0; oks < n && tries < n+2 && !w.r.stopping(); tries++ {
		if oks == n-1 {
			time.Sleep(p.latchGap)
		}
		d := via(tries)
		dc := newCallCtx(p.deadlines[1+tries%3], 0)
		out, _ := w.rec.do(Call{Client: d.name, Prim: PrimLatch, Op: OpCountDown, Res: []string{res}}, dc,
			func(ctx context.Context) (bool, error) { return true, d.c.CountDownLatch(name).CountDown(ctx) })
		dc.done()
		if out == OutOK {
			oks++
		}
	}
	if p.latchReset && oks == n && !w.r.stopping() {
		w.latchAgain(p, name, res, via)
	}
	wg.Wait()
}

// latchAgain sets a latch whose count just reached zero once more, at
// once, and has it awaited through the Client that awaited the round
// before (whose subscription may still deliver that round's zero message,
// late on a slow pub/sub connection: it must not let the new awaiter go),
// giving up after p.resetAwait; then counts it down, so the name ends
// open.
func (w *worker) latchAgain(p plan, name, res string, via func(int) *client) {
	sc := newCallCtx(p.deadlines[4], 0)
	out, _ := w.rec.do(Call{Client: w.ca.name, Prim: PrimLatch, Op: OpSetCount, Res: []string{res}, N: 1}, sc,
		func(ctx context.Context) (bool, error) { return w.ca.c.CountDownLatch(name).TrySetCount(ctx, 1) })
	sc.done()
	if out != OutOK {
		return
	}
	a := via(1)
	ac := newCallCtx(p.resetAwait, 0)
	w.rec.do(Call{Client: a.name, Prim: PrimLatch, Op: OpAwait, Res: []string{res}}, ac,
		func(ctx context.Context) (bool, error) {
			err := a.c.CountDownLatch(name).Await(ctx)
			return err == nil, err
		})
	ac.done()
	dc := newCallCtx(p.deadlines[5], 0)
	w.rec.do(Call{Client: w.ca.name, Prim: PrimLatch, Op: OpCountDown, Res: []string{res}}, dc,
		func(ctx context.Context) (bool, error) { return true, w.ca.c.CountDownLatch(name).CountDown(ctx) })
	dc.done()
}
