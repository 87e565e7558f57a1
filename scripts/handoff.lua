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
-- The next owner's field goes in before the releasing owner's comes out, so
-- that the hash never empties: on a Cluster slot being migrated, a write to
-- a key that the same run has just deleted aborts the script there, after
-- the deletion took effect (the lock would be left free, with nothing in
-- the latch to tell a retry).
redis.call('hset', KEYS[1], ARGV[3], 1)
if ARGV[3] ~= ARGV[2] then
    redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('pexpire', KEYS[1], ARGV[4])
return 3
