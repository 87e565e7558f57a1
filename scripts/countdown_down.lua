-- countdown_down.lua: a count-down latch's CountDown (RCountDownLatch).
--
-- KEYS[1]  the latch's count (see countdown_set.lua)
-- KEYS[2]  the channel, redisson_countdownlatch__channel__{name}
-- ARGV[1]  the publish command
--
-- Returns the count left. A missing count stays missing (0: counting down
-- an open latch changes nothing). The count that reaches 0 deletes the key,
-- so that TrySetCount may set it again, and publishes the zero message "0".
--[[publish]]
if redis.call('exists', KEYS[1]) == 0 then
    return 0
end
local left = redis.call('decr', KEYS[1])
if left > 0 then
    return left
end
redis.call('del', KEYS[1])
if left == 0 then
    publish(ARGV[1], KEYS[2], '0')
end
return 0
