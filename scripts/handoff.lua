-- handoff.lua: release one hold of a reentrant lock and, when it was the
-- last, hand the lock straight to the next local waiter in the same step.
--
-- KEYS[1]  the lock hash: field <owner> -> hold count
-- ARGV[1]  lease in ms, re-applied when the releasing owner keeps holds
-- ARGV[2]  the releasing owner
-- ARGV[3]  the next owner
-- ARGV[4]  the next owner's lease in ms
--
-- Returns nil when the releasing owner holds nothing (nothing changes), 0
-- when it keeps holds, 3 when the lock now belongs to the next owner with
-- one hold. Nothing is published: the lock is never free, so there is nobody
-- to wake (waiters elsewhere retry when the holder's TTL runs out, and the
-- caller ends every run of hand-offs with an ordinary release).
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
local left = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if left > 0 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 0
end
redis.call('hdel', KEYS[1], ARGV[2])
redis.call('hset', KEYS[1], ARGV[3], 1)
redis.call('pexpire', KEYS[1], ARGV[4])
return 3
