package torture

import "testing"

func TestOutageNamed(t *testing.T) {
	restart := Fault{Kind: FaultRestart, Server: "A", Start: at(100), End: at(3000)}
	call := func(prim Prim, res string, start, end int, err string) Call {
		c := waitCall(1, prim, res, "o", start, end, OutCtx)
		c.Err = err
		return c
	}
	const bare = `lock "x": context deadline exceeded`
	const named = `lock "x": context deadline exceeded (last Redis error: dial tcp 127.0.0.1:1: connect: connection refused)`
	tests := []struct {
		name string
		call Call
		want []string
	}{
		{"bare ctx error inside the downtime", call(PrimLock, "A/x", 500, 1500, bare), []string{VUnnamed}},
		{"named inside the downtime", call(PrimLock, "A/x", 500, 1500, named), nil},
		{"a semaphore's bare error", call(PrimSem, "A/s", 500, 1500, bare), []string{VUnnamed}},
		{"began before the kill", call(PrimLock, "A/x", 50, 1500, bare), nil},
		{"began as the kill went out (replies still on the wire)", call(PrimLock, "A/x", 101, 135, bare), nil},
		{"began once the kill settled", call(PrimLock, "A/x", 150, 185, bare), []string{VUnnamed}},
		{"ended as the server came back", call(PrimLock, "A/x", 500, 2900, bare), nil},
		{"another server's call", call(PrimLock, "B/x", 500, 1500, bare), nil},
		{"a MultiLock names no Redis error", func() Call {
			c := call(PrimMulti, "A/x", 500, 1500, bare)
			c.Res = []string{"A/x", "B/y"}
			return c
		}(), nil},
		{"not ended by its ctx", func() Call { c := call(PrimLock, "A/x", 500, 1500, bare); c.Out = OutRedis; return c }(), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, CheckOutageNamed(logOf(5000, nil, []Call{tc.call}, []Fault{restart})), tc.want...)
		})
	}
}
