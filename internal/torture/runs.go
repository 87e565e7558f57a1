package torture

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The lease-setting scripts the hook sees run, recorded for the stale-grant
// and relay checks (see LeaseRun).

// scriptArg is ARGV[i] of a script call, as an integer.
func scriptArg(args []any, i int) (int64, bool) {
	s, ok := scriptArgString(args, i)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// scriptArgString is ARGV[i] of a script call as sent.
func scriptArgString(args []any, i int) (string, bool) {
	if len(args) < 3 {
		return "", false
	}
	numKeys, err := strconv.Atoi(fmt.Sprint(args[2]))
	if err != nil {
		return "", false
	}
	at := 3 + numKeys + i - 1
	if at >= len(args) {
		return "", false
	}
	return fmt.Sprint(args[at]), true
}

// ran records the lease-setting scripts among cmds of server, which have
// run by now: every granting one, and the others when held is set (their
// replies are about to be held back or lost).
func (f *Faults) ran(server string, cmds []redis.Cmder, held bool) {
	var now time.Time
	for _, cmd := range cmds {
		args := cmd.Args()
		sha, _ := scriptSHA(args)
		ls, ok := leaseScripts[sha]
		if !ok || len(args) < 4 || !(ls.grants || ls.always || held) {
			continue
		}
		lease, ok1 := scriptArg(args, ls.lease)
		owner, ok2 := scriptArgString(args, ls.owner)
		if !ok1 || !ok2 {
			continue
		}
		if ls.rawID {
			owner = hex.EncodeToString([]byte(owner))
		}
		if now.IsZero() {
			now = time.Now()
		}
		f.mu.Lock()
		f.runs = append(f.runs, LeaseRun{T: now, Script: ls.name, Grants: ls.grants, Res: server + "/" + fmt.Sprint(args[3]), Owner: owner,
			Lease: time.Duration(lease) * time.Millisecond})
		f.mu.Unlock()
	}
}

// TakeRuns returns the runs recorded so far and forgets them (a long run
// records many; the log keeps them from then on).
func (f *Faults) TakeRuns() []LeaseRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	runs := f.runs
	f.runs = nil
	return runs
}
