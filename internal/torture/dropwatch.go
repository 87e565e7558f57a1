package torture

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/lockactor/lockactor/actors"
)

// dropWatch is the Clients' slog.Handler: it hears the library's Warn that
// a release was refused for good and will not be sent again, and reports a
// violation when the refusal was not for good: a server that was
// read-only, out of memory, busy or loading (a FaultBlock window answers
// so), whatever words the reply wraps it in. Such a release must be
// retried; dropped, it leaves the hold in Redis until its lease runs out,
// which the liveness checks excuse inside the fault window. It also counts
// the releases lost in a master switch that were sent again, and those
// whose second sending failed, and the times a Client wrote to a new
// master ahead of its pool (topoFigures), so that a run shows whether its
// faults reached those paths.
type dropWatch struct{ r *runner }

func (h dropWatch) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h dropWatch) Handle(_ context.Context, rec slog.Record) error {
	switch rec.Message {
	case actors.LogReleasedAgain:
		h.r.resent.Add(1)
		return nil
	case actors.LogReleasedAgainFailed:
		h.r.resentFailed.Add(1)
		return nil
	case actors.LogRouted:
		h.r.routed.Add(1)
		return nil
	case actors.LogRefusedForGood:
	default:
		return nil
	}
	var lock, err string
	rec.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "lock":
			lock = a.Value.String()
		case "err":
			err = a.Value.String()
		}
		return true
	})
	if !refusedForGood(err) {
		h.r.violate(VDropped, fmt.Sprintf("%s: a release refused by a passing error was dropped as refused for good (%s)", lock, err))
	}
	return nil
}

func (h dropWatch) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h dropWatch) WithGroup(string) slog.Handler      { return h }
