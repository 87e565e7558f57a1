-- fair_lock.lua: take one hold of a fair lock, or join (or stay in) its queue.
--
-- KEYS[1]  the lock hash: field <owner> -> hold count
-- KEYS[2]  the queue, redisson_lock_queue:{name}: list of waiting owners
-- KEYS[3]  the deadlines, redisson_lock_timeout:{name}: zset owner -> epoch ms
-- KEYS[4]  the lock's channel, redisson_lock__channel:{name}: never read. It
--          never exists as a key, so on a Cluster slot being migrated the
--          script is refused whole (TRYAGAIN) rather than started: there a
--          command on a key the same run has emptied (the purge may empty
--          the queue, then read it) aborts the script after the writes
--          before it took effect.
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner
-- ARGV[3]  W: how long a waiter stays queued without retrying, ms
-- ARGV[4]  now, epoch ms of the caller's clock
-- ARGV[5]  "1" for a single attempt that must not join the queue
--
-- Returns nil when granted (fresh or reentrant); otherwise the estimated wait
-- in ms (a single attempt gets the lock's PTTL, or 0 when it is free but
-- others are queued). Waiters whose deadline has passed, or that have none,
-- are purged from the head first (fair_purge.lua, spliced in at its marker
-- line). A newcomer's deadline is the tail's plus W, or now plus the lock's
-- PTTL plus W when the tail has no deadline.
local now = tonumber(ARGV[4])
local w = tonumber(ARGV[3])
--[[fair_purge]]

local free = redis.call('exists', KEYS[1]) == 0
if free and (redis.call('exists', KEYS[2]) == 0 or redis.call('lindex', KEYS[2], 0) == ARGV[2]) then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], ARGV[2])
    for _, waiter in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
        redis.call('zincrby', KEYS[3], -w, waiter)
    end
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end

if ARGV[5] == '1' then
    return math.max(redis.call('pttl', KEYS[1]), 0)
end
local mine = redis.call('zscore', KEYS[3], ARGV[2])
if mine then
    return tonumber(mine) - w - now
end
-- The newcomer's deadline follows the tail's; a tail without one (left by
-- another client, or a partial state) counts as absent, as in Redisson, and
-- the lock's PTTL is the base. fair_unlock and this script purge it once it
-- reaches the head.
local last = redis.call('lindex', KEYS[2], -1)
local lastDeadline = nil
if last and last ~= ARGV[2] then
    lastDeadline = tonumber(redis.call('zscore', KEYS[3], last))
end
local base
if lastDeadline then
    base = lastDeadline - now
else
    base = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], now + base + w, ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2])
end
return base
