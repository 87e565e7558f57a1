-- force_unlock.lua: delete a lock whoever holds it and wake its waiters.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the wake-up channel, redisson_lock__channel:{name}
-- ARGV[1]  the message to publish ("0")
-- ARGV[2]  the publish command: "publish", or "spublish" on a sharded cluster
--
-- Returns 1 when a lock was deleted (and the message published), else 0.
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
