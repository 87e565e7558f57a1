-- fair_force_unlock.lua: delete a fair lock whoever holds it and wake the
-- queue's head.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue, redisson_lock_queue:{name}
-- KEYS[3]  the deadlines, redisson_lock_timeout:{name}: zset owner -> epoch ms
-- KEYS[4]  the channel prefix, redisson_lock__channel:{name}
-- ARGV[1]  the message ("0")
-- ARGV[2]  now, epoch ms of the caller's clock
-- ARGV[3]  the publish command
--
-- Returns 1 when a lock was deleted, else 0. Waiters whose deadline has
-- passed are purged from the head first (fair_purge.lua, spliced in at its
-- marker line), so the message goes to a live waiter rather than to one
-- whose process died.
--[[publish]]
local now = tonumber(ARGV[2])
--[[fair_purge]]
if redis.call('del', KEYS[1]) == 0 then
    return 0
end
local head = redis.call('lindex', KEYS[2], 0)
if head then
    publish(ARGV[3], KEYS[4] .. ':' .. head, ARGV[1])
end
return 1
