-- unlock.lua: release one hold of a reentrant lock and wake waiters when the
-- last hold goes.
--
-- KEYS[1]  the lock hash: field <owner> -> hold count
-- KEYS[2]  the wake-up channel, redisson_lock__channel:{name}
-- ARGV[1]  the message published on a full release ("0")
-- ARGV[2]  lease in milliseconds, re-applied when holds remain
-- ARGV[3]  owner, "<clientUUID>:<handleID>"
-- ARGV[4]  the publish command: "publish", or "spublish" on a sharded
--          cluster; "" publishes nothing (a SpinLock whose Client was given
--          WithSpinPublish(false))
-- ARGV[5]  optional: a channel on which to publish ARGV[6] just before the
--          message, with the same command (lockactor's note, on the lock
--          channel's ListenerMark, that the release is a lockactor
--          Client's); "" or absent: none
-- ARGV[6]  the note's payload
--
-- Returns nil when the owner holds nothing (nothing changes), 0 when holds
-- remain, 1 when the lock was deleted and the message published, 4 when it
-- was deleted and nothing published: ARGV[4] was "", or the server refused
-- the command (an ACL user denied the channel or the command).
--
-- A refused publish does not fail the release (see publish.lua).
--[[publish]]
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local left = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if left > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('del', KEYS[1])
if ARGV[5] and ARGV[5] ~= '' then
    publish(ARGV[4], ARGV[5], ARGV[6])
end
if publish(ARGV[4], KEYS[2], ARGV[1]) then
    return 1
end
return 4
