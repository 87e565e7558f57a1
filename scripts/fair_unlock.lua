-- fair_unlock.lua: release one hold of a fair lock and wake the queue's head.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue, redisson_lock_queue:{name}
-- KEYS[3]  the deadlines, redisson_lock_timeout:{name}
-- KEYS[4]  the channel prefix, redisson_lock__channel:{name}; the head waiter
--          listens on "<prefix>:<owner>"
-- ARGV[1]  the message ("0")
-- ARGV[2]  lease in ms, re-applied when holds remain
-- ARGV[3]  owner
-- ARGV[4]  now, epoch ms
-- ARGV[5]  the publish command
--
-- Returns nil when the owner holds nothing, 0 when holds remain, 1 when the
-- lock was deleted (and the head, if any, told). Waiters whose deadline has
-- passed, or that have none, are purged from the head first (fair_purge.lua,
-- spliced in at its marker line), so the message goes to a live waiter.
-- When the lock is free already (the owner's hold expired) the head is told
-- too, as Redisson's unlock does: a waiter that sleeps until told, or until
-- its own estimate of its turn, learns the lock is free now.
--[[publish]]
local now = tonumber(ARGV[4])
--[[fair_purge]]
if redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head then
        publish(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1])
    end
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local left = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if left > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('del', KEYS[1])
local head = redis.call('lindex', KEYS[2], 0)
if head then
    publish(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1])
end
return 1
