package torture

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// clashStep uses a name of its own as two kinds at once, as a service with
// a naming mistake would: a Semaphore Release on a name that holds a Lock's
// hash (Redis answers WRONGTYPE), or on a key that holds no number (set
// here on the admin connection: "ERR value is not an integer"). Redis
// refuses such a release whatever is tried again, so the caller must hear
// the error (CheckCallErrors) and nothing may send the release again:
// once the name is free (the lock released, the key deleted), a release
// sent again would mint a permit out of nothing, which checkClashes looks
// for after the run.
func (w *worker) clashStep(p plan) {
	w.clashes++
	name := fmt.Sprintf("clash%d.%d", w.rec.g, w.clashes)
	res := "A/" + name
	admin := w.r.admin["A"]
	l := w.ca.c.Lock(name)
	var h *openHold
	if p.shape%2 == 0 {
		owner := w.r.cfg.OwnerOf(l)
		out, ci := w.acquireLock(w.ca, l, PrimLock, res, owner, shape{op: OpLock}, p.deadlines[0])
		if out != OutOK {
			return
		}
		h = w.grant(l, Hold{Prim: PrimLock, Res: res, Owner: owner}, ci)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := admin.Set(ctx, name, "not-a-count", 0).Err()
		cancel()
		if err != nil {
			return
		}
	}
	rc := newCallCtx(p.deadlines[3], 0)
	w.rec.do(Call{Client: w.ca.name, Prim: PrimSem, Op: OpRelease, Res: []string{res}, N: 1}, rc,
		func(ctx context.Context) (bool, error) { return true, w.ca.c.Semaphore(name).Release(ctx, 1) })
	rc.done()
	if h != nil {
		w.release(w.ca, l, PrimLock, []string{res}, []string{w.r.cfg.OwnerOf(l)}, 1, p, h)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = admin.Del(ctx, name).Err()
	cancel()
}

// clashRes reports whether res is a kind-clash step's name.
func clashRes(res string) bool { return strings.HasPrefix(res, "A/clash") }

// clashWait is how long checkClashes keeps looking: past the longest
// backoff of a release retried in the background (a second).
const clashWait = 1500 * time.Millisecond

// checkClashes: once the workers stopped, no kind-clash name whose Release
// was refused for good may hold a number. Each was freed by its step (its
// lock released, its key deleted), so a number there is that release sent
// again, which counted a permit out of nothing. (A Release whose first try
// met a passing error, the hook's, goes on in the background by design, and
// may land once the name is free: those names are not judged.)
func (r *runner) checkClashes(l *Log) {
	names := map[string]bool{}
	for i := range l.Calls {
		c := &l.Calls[i]
		if c.Prim == PrimSem && len(c.Res) == 1 && clashRes(c.Res[0]) && refusedForGood(c.Err) {
			names[strings.TrimPrefix(c.Res[0], "A/")] = true
		}
	}
	if len(names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), clashWait+2*time.Second)
	defer cancel()
	deadline := time.Now().Add(clashWait)
	for {
		for _, name := range sortedKeys(names) {
			v, err := r.admin["A"].Get(ctx, name).Result()
			if err == nil && isCount(v) && r.firstReport("clash "+name) {
				r.violate(VClash, fmt.Sprintf("A/%s: holds the count %s after every step ended: a Semaphore Release that Redis refused (the name was a lock, or held no number) was sent again once the name was free, and minted permits out of nothing", name, v))
			}
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// refusedForGood reports whether a call's error is Redis refusing the
// command for what the key holds, which no retry changes.
func refusedForGood(err string) bool {
	return strings.Contains(err, "WRONGTYPE") || strings.Contains(err, "not an integer")
}

// isCount reports whether v reads as an integer.
func isCount(v string) bool {
	_, err := strconv.ParseInt(v, 10, 64)
	return err == nil
}
