-- fair_cancel.lua: take a waiter that gave up out of a fair lock's queue.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue, redisson_lock_queue:{name}
-- KEYS[3]  the deadlines, redisson_lock_timeout:{name}
-- KEYS[4]  the channel prefix, redisson_lock__channel:{name}
-- ARGV[1]  owner
-- ARGV[2]  W, ms: every waiter behind the leaver moves up by this much
-- ARGV[3]  the message ("0")
-- ARGV[4]  the publish command
--
-- Returns 1 if the owner was queued, else 0. When the lock is free and the
-- queue has a new head, the head is told, so a leaver never stalls the queue.
local queue = redis.call('lrange', KEYS[2], 0, -1)
local at = nil
for i, waiter in ipairs(queue) do
    if waiter == ARGV[1] then at = i break end
end
if not at then
    return 0
end
for i = at + 1, #queue do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[2]), queue[i])
end
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('lrem', KEYS[2], 0, ARGV[1])
if at == 1 and redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head then
        redis.call(ARGV[4], KEYS[4] .. ':' .. head, ARGV[3])
    end
end
return 1
