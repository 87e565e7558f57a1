-- fair_purge.lua: a snippet, not a script: scripts.go splices it into
-- fair_lock.lua, fair_unlock.lua, fair_cancel.lua and fair_force_unlock.lua
-- in place of their fair_purge marker line, leaving out this header.
--
-- It expects in scope:
-- KEYS[2]  the queue, redisson_lock_queue:{name}: list of waiting owners
-- KEYS[3]  the deadlines, redisson_lock_timeout:{name}: zset owner -> epoch ms
-- now      a local the host sets first: epoch ms of the caller's clock
-- It reads no ARGV.
--
-- Removes the waiters at the head of the queue whose deadline has passed
-- (deadline <= now), or that have none, from the queue and the deadlines,
-- up to the first waiter whose deadline is still to come. It returns
-- nothing and leaves no names behind: the host script goes on after it.
while true do
    local first = redis.call('lindex', KEYS[2], 0)
    if not first then break end
    local deadline = tonumber(redis.call('zscore', KEYS[3], first))
    if deadline == nil or deadline <= now then
        redis.call('zrem', KEYS[3], first)
        redis.call('lpop', KEYS[2])
    else
        break
    end
end
