package messages

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A Release is answered once: a second answer (a panic's recovery after the
// first went out, say) is dropped instead of blocking the actor on a full
// reply channel.
func TestReleaseAnswersOnce(t *testing.T) {
	m := &Release{Reply: make(chan ReleaseResult, 1)}
	m.Answer(ReleaseResult{Gone: true})
	m.Answer(ReleaseResult{NotHeld: true}) // would block on the full channel
	if res := <-m.Reply; !res.Gone || res.NotHeld {
		t.Fatalf("answer = %+v, want the first", res)
	}
	(&Release{}).Answer(ReleaseResult{}) // no reply channel: nothing to do
}

// A Request is answered or abandoned, never both.
func TestRequestAnswerOrAbandon(t *testing.T) {
	tests := []struct {
		name         string
		abandonFirst bool
	}{{"answer first", false}, {"abandon first", true}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRequest()
			if tc.abandonFirst {
				if !r.Abandon() || r.Answer(Result{Granted: true}) || r.Pending() {
					t.Fatal("an abandoned request took an answer")
				}
				return
			}
			if !r.Answer(Result{Granted: true}) || r.Abandon() || r.Pending() {
				t.Fatal("an answered request was abandoned")
			}
			if <-r.Done(); !r.Result().Granted {
				t.Fatal("answer lost")
			}
		})
	}
}
