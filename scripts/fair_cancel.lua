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
-- ARGV[5]  now, epoch ms of the caller's clock
--
-- Returns 1 if the owner was queued, else 0. Once the owner is out, waiters
-- at the head whose deadline has passed are purged (fair_purge.lua, spliced
-- in at its marker line); then, when the lock is free and the queue's head
-- changed, the new head is told, so neither a leaver nor a dead waiter it
-- uncovers stalls the queue.
--[[publish]]
local before = redis.call('lindex', KEYS[2], 0)
local queue = redis.call('lrange', KEYS[2], 0, -1)
local at = nil
for i, waiter in ipairs(queue) do
    if waiter == ARGV[1] then at = i break end
end
if at then
    for i = at + 1, #queue do
        redis.call('zincrby', KEYS[3], -tonumber(ARGV[2]), queue[i])
    end
    redis.call('zrem', KEYS[3], ARGV[1])
    redis.call('lrem', KEYS[2], 0, ARGV[1])
end
local now = tonumber(ARGV[5])
--[[fair_purge]]
local head = redis.call('lindex', KEYS[2], 0)
if head and head ~= before and redis.call('exists', KEYS[1]) == 0 then
    publish(ARGV[4], KEYS[4] .. ':' .. head, ARGV[3])
end
if at then
    return 1
end
return 0
