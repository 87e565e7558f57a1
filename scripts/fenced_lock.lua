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
--
-- A counter below the floor went back (a failover lost the writes that
-- raised it, or it was deleted): it is first raised to the floor, an
-- ordinary write that other clients' INCRs continue from. Then a grant from
-- zero holds INCRs it, so the token is max(counter, floor) + 1; a reentrant
-- grant reports the counter as it is (a hold keeps one token), unless it
-- was not above the floor, in which case it INCRs too.
--
-- Returns {1, token} when granted, token > floor.
-- Returns {0, pttl} when another owner holds the lock.
local fresh = redis.call('exists', KEYS[1]) == 0
if not fresh and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return {0, redis.call('pttl', KEYS[1])}
end
redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
local floor = tonumber(ARGV[3])
local counter = tonumber(redis.call('get', KEYS[2]) or '0')
if counter < floor then
    redis.call('set', KEYS[2], ARGV[3])
    counter = floor
end
if fresh or counter == floor then
    return {1, redis.call('incr', KEYS[2])}
end
return {1, counter}
