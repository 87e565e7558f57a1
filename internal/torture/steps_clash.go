package torture

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lockactor/lockactor"
	"github.com/lockactor/lockactor/scripts"
)

// clashStep uses a name of its own as two kinds at once, as a service with
// a naming mistake would, in one of three ways:
//
//   - a Semaphore Release on a name that holds a Lock's hash (Redis answers
//     WRONGTYPE);
//   - a Semaphore Release on a key that holds no number (set here on the
//     admin connection: "ERR value is not an integer");
//   - an Unlock of a Lock whose key was taken over meanwhile by another
//     kind's (deleted and set to a word on the admin connection, as an
//     operator's ForceUnlock and another service's SET would): WRONGTYPE.
//
// Redis refuses such a release whatever is tried again, so the caller must
// hear the error (CheckCallErrors) and nothing may send the release again:
// once the name is free (the lock released, the key deleted), a Semaphore
// release sent again would mint a permit out of nothing. checkClashes
// looks for both after the run.
func (w *worker) clashStep(p plan) {
	w.clashes++
	name := fmt.Sprintf("%s%d.%d", clashPrefix, w.rec.g, w.clashes)
	res := "A/" + name
	admin := w.r.admin["A"]
	adminDo := func(do func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return do(ctx)
	}
	l := w.ca.c.Lock(name)
	var h *openHold
	switch p.shape % 3 {
	case 0:
		owner := w.r.cfg.OwnerOf(l)
		out, ci := w.acquireLock(w.ca, l, PrimLock, res, owner, shape{op: OpLock}, p.deadlines[0])
		if out != OutOK {
			return
		}
		h = w.grant(l, Hold{Prim: PrimLock, Res: res, Owner: owner}, ci)
	case 1:
		if adminDo(func(ctx context.Context) error { return admin.Set(ctx, name, "not-a-count", 0).Err() }) != nil {
			return
		}
	case 2:
		w.clashUnlock(p, l, name, res)
		return
	}
	rc := newCallCtx(p.deadlines[3], 0)
	w.rec.do(Call{Client: w.ca.name, Prim: PrimSem, Op: OpRelease, Res: []string{res}, N: 1}, rc,
		func(ctx context.Context) (bool, error) { return true, w.ca.c.Semaphore(name).Release(ctx, 1) })
	rc.done()
	if h != nil {
		w.release(w.ca, l, PrimLock, []string{res}, []string{w.r.cfg.OwnerOf(l)}, 1, p, h)
		return
	}
	_ = adminDo(func(ctx context.Context) error { return admin.Del(ctx, name).Err() })
}

// clashUnlock takes l (a fixed lease, so that no watchdog renews it; not
// logged as a hold: its key is taken from under it on purpose), has the
// admin connection replace its key by a word, and records the Unlock,
// which Redis refuses for good; then frees the name.
func (w *worker) clashUnlock(p plan, l *lockactor.Lock, name, res string) {
	admin := w.r.admin["A"]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if ok, err := l.TryLock(ctx, lockactor.WithLease(5*time.Second)); !ok || err != nil {
		return
	}
	if admin.Del(ctx, name).Err() != nil || admin.Set(ctx, name, "not-a-count", 0).Err() != nil {
		_ = l.Unlock(ctx)
		return
	}
	rc := newCallCtx(p.deadlines[3], 0)
	w.rec.do(Call{Client: w.ca.name, Prim: PrimLock, Op: OpUnlock, Res: []string{res}, Owners: []string{w.r.cfg.OwnerOf(l)}}, rc,
		func(ctx context.Context) (bool, error) { return true, l.Unlock(ctx) })
	rc.done()
	_ = admin.Del(ctx, name).Err()
}

// clashPrefix starts every kind-clash step's name.
const clashPrefix = "clash"

// clashRes reports whether res is a kind-clash step's name.
func clashRes(res string) bool { return strings.HasPrefix(res, "A/"+clashPrefix) }

// clashWait is how long checkClashes keeps looking: past the longest
// backoff of a release retried in the background (a second).
const clashWait = 1500 * time.Millisecond

// checkClashes: once the workers stopped, no release that Redis refused
// for good on a kind-clash name may have been sent again after its caller
// heard the refusal (the hook saw every release script go out), and no
// such name may hold a number: each was freed by its step (its lock
// released, its key deleted), so a number there is a Semaphore release
// sent again, which counted a permit out of nothing. (A release whose
// first try met a passing error, the hook's, goes on in the background by
// design, and may land once the name is free: its caller did not hear a
// refusal for good, and its name is not judged.)
func (r *runner) checkClashes(l *Log) {
	type refusal struct {
		at  time.Time // when the caller heard it
		sha string    // the release script refused
	}
	refused := map[string]refusal{} // by name
	for i := range l.Calls {
		c := &l.Calls[i]
		if len(c.Res) != 1 || !clashRes(c.Res[0]) || !refusedForGood(c.Err) {
			continue
		}
		name := strings.TrimPrefix(c.Res[0], "A/")
		switch c.Prim {
		case PrimSem:
			refused[name] = refusal{c.End, scripts.Latched.SemaphoreRelease.Hash()}
		case PrimLock:
			refused[name] = refusal{c.End, scripts.Latched.Unlock.Hash()}
		}
	}
	if len(refused) == 0 {
		return
	}
	granted := clashReleasesGranted(l)
	ctx, cancel := context.WithTimeout(context.Background(), clashWait+2*time.Second)
	defer cancel()
	deadline := time.Now().Add(clashWait)
	for !time.Now().After(deadline) {
		for _, name := range sortedKeys(refused) {
			if granted[name] {
				continue
			}
			v, err := r.admin["A"].Get(ctx, name).Result()
			if err == nil && isCount(v) && r.firstReport("clash "+name) {
				r.violate(VClash, fmt.Sprintf("A/%s: holds the count %s after every step ended: a Semaphore Release that Redis refused (the name was a lock, or held no number) was sent again once the name was free, and minted permits out of nothing", name, v))
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	for _, s := range r.faults.clashSends() {
		name := strings.TrimPrefix(s.res, "A/")
		if rf, ok := refused[name]; ok && s.sha == rf.sha && s.t.After(rf.at) && r.firstReport("clash sent "+name) {
			r.violate(VClash, fmt.Sprintf("%s: the release script that Redis refused for good went out again %v after its caller heard the refusal", s.res, s.t.Sub(rf.at).Round(time.Millisecond)))
		}
	}
}

// clashReleasesGranted lists the kind-clash names on which a Semaphore
// Release returned nil: Redis found the name free (the step's lock hold
// lost, as a failover that drops the grant does) and counted the permit,
// as a Redisson release does. A number there is that Release's, not one
// sent again after a refusal; the hook's record of sends still judges
// those names.
func clashReleasesGranted(l *Log) map[string]bool {
	granted := map[string]bool{}
	for i := range l.Calls {
		c := &l.Calls[i]
		if len(c.Res) == 1 && clashRes(c.Res[0]) && c.Prim == PrimSem && c.Op == OpRelease && c.Out == OutOK {
			granted[strings.TrimPrefix(c.Res[0], "A/")] = true
		}
	}
	return granted
}

// refusedForGood reports whether a call's error is Redis refusing the
// command for what the key holds, which no retry changes: another kind's
// data, or a value that is no count.
func refusedForGood(err string) bool {
	for _, s := range []string{"WRONGTYPE", "not an integer", "out of range", "overflow"} {
		if strings.Contains(err, s) {
			return true
		}
	}
	return false
}

// isCount reports whether v reads as an integer.
func isCount(v string) bool {
	_, err := strconv.ParseInt(v, 10, 64)
	return err == nil
}
