-- fenced_lock.lua: take one hold of a fenced reentrant lock and report its
-- fencing token.
--
-- KEYS[1]  the lock hash: field <owner> -> hold count
-- KEYS[2]  the token counter, redisson_lock_token:{name} (never expires)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner, "<clientUUID>:<handleID>"
--
-- Returns {1, token} when granted: a grant from zero holds INCRs the counter,
-- a reentrant one reports the current value, so a hold keeps one token.
-- Returns {0, pttl} when another owner holds the lock.
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, redis.call('incr', KEYS[2])}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, tonumber(redis.call('get', KEYS[2]) or '0')}
end
return {0, redis.call('pttl', KEYS[1])}
