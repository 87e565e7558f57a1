package torture

import (
	"fmt"
	"strings"
	"time"
)

// CheckOutageNamed reports calls whose ctx ended while their server was
// down (killed for a restart, until the restart began to come back) for
// the whole call, and whose error does not name Redis's: a caller whose
// wait ran out on an unreachable Redis must learn why, not get the bare ctx
// error a busy lock gives. The calls judged are those of one handle on one
// Client (a MultiLock's span Clients, and its error names no Redis error);
// the restart's last restartBack may already have answered a PING, and
// replies the server sent before the kill may still arrive in its first
// killSettle (a reply heard after a call began tells the runtime Redis
// answered: it names no error then, and asks nothing).
func CheckOutageNamed(l *Log) []Violation {
	var vs []Violation
	for i := range l.Calls {
		c := &l.Calls[i]
		if c.Out != OutCtx || !namesOutage(c) {
			continue
		}
		for _, f := range l.Faults {
			if f.Kind != FaultRestart || f.Server != serverOf(c.Res[0]) ||
				c.Start.Before(f.Start.Add(killSettle)) || c.End.After(f.End.Add(-restartBack)) {
				continue
			}
			if !strings.Contains(c.Err, "last Redis error") {
				vs = append(vs, Violation{Check: VUnnamed, At: c.End, Msg: fmt.Sprintf(
					"%v: %s %s (g%d, %s) [%s, %s], inside the restart of %s [%s, %s], returned %q: no Redis error named",
					c.Res, c.Prim, c.Op, c.G, c.Client, l.at(c.Start), l.at(c.End), f.Server, l.at(f.Start), l.at(f.End), c.Err)})
			}
			break
		}
	}
	return vs
}

// restartBack is how long before a restart's recorded end the server may
// already answer (its process is up before the rig's PING says so).
const restartBack = 200 * time.Millisecond

// killSettle is how long after a restart's recorded start replies sent
// before the kill may still be read: the start is taken before SIGKILL.
const killSettle = 50 * time.Millisecond

// namesOutage reports whether c is a call whose error names the last Redis
// error when its ctx ends while Redis cannot be reached.
func namesOutage(c *Call) bool {
	if len(c.Res) != 1 {
		return false
	}
	switch c.Prim {
	case PrimLock, PrimFair, PrimFenced, PrimSpin, PrimRead, PrimWrite, PrimSem, PrimPermit:
	default:
		return false
	}
	switch c.Op {
	case OpLock, OpTryLock, OpAcquire, OpTryAcquire, OpUnlock, OpRelease, OpExtend:
		return true
	}
	return false
}
