package actors

import "time"

// backoff is a retry delay that doubles on each step, from lo up to hi. Its
// zero value starts from lo. The bounds are given to each step rather than
// kept, as they are constants at every use but one (an owed release's
// ceiling follows its lease), and the value lives in structs an actor keeps
// one of per waiter, release and settlement.
type backoff struct{ cur time.Duration }

// next is the delay before the next try: twice the last one, at least lo
// and at most hi (a hi below lo counts as lo).
func (b *backoff) next(lo, hi time.Duration) time.Duration {
	b.cur = min(max(2*b.cur, lo), max(hi, lo))
	return b.cur
}

// reset makes the next step start from lo again.
func (b *backoff) reset() { b.cur = 0 }
