-- read_unlock.lua: release one read hold of a read-write lock.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the channel, redisson_rwlock:{name}
-- KEYS[3]  this owner's hold-key prefix, {name}:<owner>:rwlock_timeout
-- KEYS[4]  the hold-key prefix of every owner, {name} (hold keys are
--          "<prefix>:<field>:rwlock_timeout:<i>")
-- ARGV[1]  the message ("0": wake one)
-- ARGV[2]  owner (the read field)
-- ARGV[3]  the publish command
--
-- Returns nil when the owner has no read hold, 0 when the owner still has
-- read holds, 2 when its last read hold went but others (or its own write
-- hold) keep the lock, 1 when the lock was deleted and the message published.
-- While holds remain, the lock's TTL becomes the longest remaining read hold;
-- in write mode never less than it was, since the write hold has no hold key
-- of its own and its lease lives only in the lock's TTL (Redisson's script
-- takes the read holds alone, and so shortens the writer's lease).
--[[publish]]
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
local n = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if n == 0 then
    redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', KEYS[3] .. ':' .. (n + 1))
if redis.call('hlen', KEYS[1]) > 1 then
    local longest = -3
    for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
        local holds = tonumber(redis.call('hget', KEYS[1], field))
        if type(holds) == 'number' then
            for i = holds, 1, -1 do
                local left = redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. i)
                longest = math.max(left, longest)
            end
        end
    end
    if mode == 'write' then
        longest = math.max(longest, redis.call('pttl', KEYS[1]))
    end
    local kept = 2
    if n > 0 then kept = 0 end
    if longest > 0 then
        redis.call('pexpire', KEYS[1], longest)
        return kept
    end
    if mode == 'write' then
        return kept
    end
end
redis.call('del', KEYS[1])
publish(ARGV[3], KEYS[2], ARGV[1])
return 1
