-- fair_force_unlock.lua: delete a fair lock whoever holds it and wake the
-- queue's head.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue, redisson_lock_queue:{name}
-- KEYS[3]  the channel prefix, redisson_lock__channel:{name}
-- ARGV[1]  the message ("0")
-- ARGV[2]  the publish command
--
-- Returns 1 when a lock was deleted, else 0.
if redis.call('del', KEYS[1]) == 0 then
    return 0
end
local head = redis.call('lindex', KEYS[2], 0)
if head then
    redis.call(ARGV[2], KEYS[3] .. ':' .. head, ARGV[1])
end
return 1
