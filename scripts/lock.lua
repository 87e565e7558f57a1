-- lock.lua: take one hold of a reentrant lock (Redisson RLock layout).
--
-- KEYS[1]  the lock hash: field <owner> -> hold count
-- ARGV[1]  lease in milliseconds (PEXPIRE applied on every grant)
-- ARGV[2]  owner, "<clientUUID>:<handleID>"
--
-- Returns nil when the hold was granted (fresh or reentrant), otherwise the
-- holder's remaining time to live in milliseconds (PTTL; -1 if the key has no
-- expiry).
local held = redis.call('exists', KEYS[1]) == 0
    or redis.call('hexists', KEYS[1], ARGV[2]) == 1
if held then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
