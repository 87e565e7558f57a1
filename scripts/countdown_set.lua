-- countdown_set.lua: a count-down latch's TrySetCount (RCountDownLatch).
--
-- KEYS[1]  the latch's count: a decimal integer, no TTL; missing means no
--          count is set (a count of 0)
-- KEYS[2]  the channel, redisson_countdownlatch__channel__{name}
-- ARGV[1]  the count to set (> 0)
-- ARGV[2]  the publish command
--
-- Returns 1 when the count was set, and then publishes the new-count
-- message "1"; 0 when a count was already set (nothing changes).
--[[publish]]
if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
redis.call('set', KEYS[1], ARGV[1])
publish(ARGV[2], KEYS[2], '1')
return 1
