-- fenced_lock.lua: take one hold of a fenced reentrant lock and report its
-- fencing token, which is always above the floor the caller gives.
--
-- KEYS[1]  the lock hash: field <owner> -> hold count
-- KEYS[2]  the token counter, redisson_lock_token:{name} (never expires)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner, "<clientUUID>:<handleID>"
-- ARGV[3]  floor, a decimal integer: the token granted must be above it.
--          lockactor passes the highest token its Client has seen for the
--          name (0: none) for a hold from zero, and the hold's own token
--          minus one for a reentrant grant of a hold it already has.
-- ARGV[4]  "1" when the caller asks for a new hold (its floor is its
--          highest token), "0" for a reentrant grant of a hold it has. A
--          new hold draws a new token even when Redis still has a hold of
--          the owner's field: a stale one, whose release a failover lost
--          (a strict Sentinel torture run was handed such a stale hold's
--          old token, below one another Client had been granted since).
--
-- A new hold (ARGV[4] "1", or a free lock) draws the token
-- max(counter, floor) + 1, or the
-- server's clock in microseconds (TIME) when that is higher, and leaves it
-- in the counter, an ordinary write that other clients' INCRs continue
-- from. Tokens therefore follow the clock: whatever put the counter back
-- (a failover that lost writes, a restart without persistence, a DEL),
-- the next grant is above every token drawn at an earlier server time, on
-- any server whose clock agrees.
--
-- A reentrant grant (ARGV[4] "0", the hash holding the owner's field)
-- reports the counter as it is (a hold keeps one token),
-- unless it is not above the floor (the counter went back below the hold's
-- token): then the counter is put back to floor + 1, the hold's token.
--
-- Tokens stay exact in Lua's numbers below 2^53 (the clock reaches it in
-- the year 2255).
--
-- Returns {1, token} when granted, token > floor.
-- Returns {0, pttl} when another owner holds the lock.
local free = redis.call('exists', KEYS[1]) == 0
if not free and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return {0, redis.call('pttl', KEYS[1])}
end
redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
local floor = tonumber(ARGV[3])
local counter = tonumber(redis.call('get', KEYS[2]) or '0')
local fresh = free or ARGV[4] == '1'
if not fresh and counter > floor then
    return {1, counter}
end
-- The counter is raised to what the token must exceed, then INCRed: the
-- token is max(counter, floor, clock - 1) + 1 (no clock for a reentrant
-- grant), and INCR keeps a counter another client raised exact.
local target = floor
if fresh then
    local t = redis.call('time')
    target = math.max(target, tonumber(t[1]) * 1000000 + tonumber(t[2]) - 1)
end
if counter < target then
    redis.call('set', KEYS[2], string.format('%.0f', target))
end
return {1, redis.call('incr', KEYS[2])}
