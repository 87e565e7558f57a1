-- force_unlock.lua: delete a lock whoever holds it and wake its waiters.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the wake-up channel, redisson_lock__channel:{name}
-- ARGV[1]  the message to publish ("0")
-- ARGV[2]  the publish command: "publish", or "spublish" on a sharded
--          cluster; "" publishes nothing (a SpinLock whose Client was given
--          WithSpinPublish(false))
--
-- Returns 0 when there was no lock, 1 when a lock was deleted and the
-- message published, 2 when it was deleted and nothing published: ARGV[2]
-- was "", or the server refused the command (an ACL user denied the channel
-- or the command). A refusal does not fail the deletion (see
-- publish.lua).
--[[publish]]
if redis.call('del', KEYS[1]) == 0 then
    return 0
end
if publish(ARGV[2], KEYS[2], ARGV[1]) then
    return 1
end
return 2
