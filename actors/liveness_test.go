package actors

import (
	"testing"
	"time"

	"github.com/lockactor/lockactor/redisio"
)

// settleFailsFor answers every settlement what the actor sends for d of
// the virtual clock with no answer from Redis.
func settleFailsFor(d time.Duration, what string) step {
	return func(h *harness) {
		end := h.v.Now().Add(d)
		for h.v.Now().Before(end) && !h.t.Failed() {
			expect(what, settleErr(errLost))(h)
		}
	}
}

// TestLiveness: no waiter is left asleep on a free lock or behind one that
// left, on the virtual clock: each row says when the next attempt comes,
// to the millisecond.
func TestLiveness(t *testing.T) {
	t.Run("lock", func(t *testing.T) {
		var grantedAt time.Time // of the row that needs it
		run(t, KindLock, []scenario{
			{name: "a chain of fixed leases: each waiter tries when the lease before it ends", steps: []step{
				lock("a", "a", 300*ms),
				expectNow("lock a", reply(granted)),
				answered("a", "granted"),
				lock("b", "b", 300*ms),
				lock("c", "c", long),
				callAfter(300*ms, "lock b", reply(granted)), // a's lease ran out silently
				answered("b", "granted"),
				unanswered("c"),
				callAfter(300*ms, "lock c", reply(granted)), // and then b's
				answered("c", "granted"),
			}},
			{name: "an Unlock Redis refused: the hold is not renewed, the release goes again", steps: []step{
				lock("h", "h", 0), // a watchdog hold
				expectNow("lock h", reply(granted)),
				answered("h", "granted"),
				unlock("u", "h"),
				expectNow("unlock h", fail(errBusy)),
				watchdogTick(),
				callAfter(20*ms, "unlock h", reply(released)), // and no renewal before it
				answered("u", "gone"),
				watchdogTick(),
				noCall(time.Minute),
			}},
			{name: "an Unlock whose reply was lost and which ran: not renewed, not sent again", steps: []step{
				lock("h", "h", 0),
				expectNow("lock h", reply(granted)),
				answered("h", "granted"),
				unlock("u", "h"),
				expectNow("unlock h", lose(true, released)),
				watchdogTick(),
				expectNow("resolve unlock h", settle(redisio.Ran, released)),
				answered("u", "gone"),
				watchdogTick(),
				noCall(time.Minute),
			}},
			{name: "a final release whose reply was lost, settled as run only after 6 s of failed settlements: Lost stays open, nothing is sent again", steps: []step{
				lock("h", "h", 0),
				expectNow("lock h", reply(granted)),
				answered("h", "granted"),
				unlock("u", "h"),
				expectNow("unlock h", lose(true, released)),
				expectNow("resolve unlock h", settleErr(errLost)),
				settleFailsFor(6*time.Second, "resolve unlock h"),
				expect("resolve unlock h", settle(redisio.Ran, released)),
				lostClosed("h", false),
				noCall(time.Minute),
				lostClosed("h", false),
			}},
			{name: "a release Redis keeps refusing until the hold's lease has run out is dropped, never sent after the same owner's new grant", steps: []step{
				lock("h", "h", time.Second),
				expectNow("lock h", reply(granted)),
				answered("h", "granted"),
				func(h *harness) { grantedAt = h.v.Now() },
				unlock("u", "h"),
				expectNow("unlock h", fail(errBusy)),
				tryLock("h2", "h", 10*time.Second), // held back while the release is owed
				func(h *harness) {
					// The release is refused at every try, until it is
					// dropped at the lease's end; then the re-lock goes.
					for !h.t.Failed() {
						var c *call
						h.until(waitFor, func() bool {
							select {
							case c = <-h.st.calls:
								return true
							default:
								return false
							}
						})
						switch {
						case c == nil:
							h.t.Fatal("no call: the re-lock never went")
						case c.what == "unlock h":
							c.then(redisio.Reply{Err: errBusy})
							h.v.run()
							continue
						case c.what != "lock h":
							h.t.Fatalf("call %q", c.what)
						case h.v.Now().Sub(grantedAt) < time.Second:
							h.t.Fatalf("the re-lock went %v after the grant, before its 1s lease ran out", h.v.Now().Sub(grantedAt))
						}
						reply(granted)(h, c)
						h.v.run()
						return
					}
				},
				answered("h2", "granted"),
				answered("u", failed(errBusy)),
				noCall(time.Minute), // the old release is not sent again
			}},
			{name: "a grant whose caller had gone is given back, and a refused give-back goes again", steps: []step{
				lock("w", "w", long),
				expectNow("lock w", keep("grant")),
				abandon("w", "w"),
				later("grant", reply(granted)),
				expectNow("unlock w", fail(errBusy)),
				callAfter(20*ms, "unlock w", reply(released)),
				noCall(time.Minute),
			}},
			{name: "callers that give up at the head and in the middle are passed over", steps: holding(
				lock("a", "a", long),
				lock("b", "b", long),
				lock("c", "c", long),
				abandon("b", "b"), // in the middle
				abandon("a", "a"), // at the head
				unlock("u", "h"),
				expectNow("handoff h>c", reply(handedOver)),
				answered("c", "granted"),
			)},
		})
	})
	t.Run("fenced", func(t *testing.T) {
		run(t, KindFenced, []scenario{
			{name: "the head leaves while its grant is out: it goes back, and the next are served in order", steps: []step{
				lock("h", "h", long),
				expectNow("fenced_lock h>0", reply(fencedGrant(21))),
				answered("h", "granted"),
				lock("w1", "w1", long),
				lock("w2", "w2", long),
				lock("w3", "w3", long),
				unlock("u", "h"),
				expectNow("unlock h", reply(released)),
				answered("u", "gone"),
				expectNow("fenced_lock w1>21", keep("grant")),
				abandon("w1", "w1"), // W1's ctx ends while its grant is out
				later("grant", reply(fencedGrant(22))),
				expectNow("unlock w1", reply(released)), // given back
				expectNow("fenced_lock w2>22", reply(fencedGrant(23))),
				answered("w2", "granted"),
				unanswered("w3"),
				unlock("u2", "w2"),
				expectNow("unlock w2", reply(released)),
				answered("u2", "gone"),
				expectNow("fenced_lock w3>23", reply(fencedGrant(24))),
				answered("w3", "granted"),
			}},
		})
	})
	t.Run("read-write", func(t *testing.T) {
		run(t, KindRW, []scenario{
			{name: "a reader queued behind a writer that gives up is admitted at once", steps: []step{
				readLock("r0", "r0", long),
				expectNow("read_lock r0", reply(granted)),
				answered("r0", "granted"),
				writeLock("w", "w", long), // refused by r0's hold: no attempt
				readLock("r1", "r1", long),
				noCall(time.Second), // held back behind the writer
				abandon("w", "w"),
				expectNow("read_lock r1", reply(granted)),
				answered("r1", "granted"),
			}},
		})
	})
	t.Run("semaphore", func(t *testing.T) {
		run(t, KindSemaphore, []scenario{
			{name: "a small request behind a large one that gives up is served at once", permits: 1, steps: []step{
				acquireN("big", 2),
				expectNow("sem_acquire 2", reply(semNo)),
				acquireN("small", 1),
				noCall(time.Second), // behind the head
				abandon("big", ""),
				expectNow("sem_acquire 1", reply(semOK)),
				answered("small", "granted"),
			}},
		})
	})
}
