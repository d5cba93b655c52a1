-- rw_read_renew: extend a live read hold's lease (watchdog, extend). Never creates a hold,
-- so a late renewal after a release or expiry cannot resurrect it.
--
-- KEYS[1] readers zset: read hold id -> lease deadline in server milliseconds
-- KEYS[2] read owners hash: <owner> = number of live read holds
-- KEYS[3] fence string: the last write epoch's token, kept the margin past the latest read
--         lease (as in rw_read_acquire.lua)
-- ARGV[1] hold id, ARGV[2] lease TTL in ms, ARGV[3] fence margin in ms
--
-- Returns 1 if the hold is live and its lease now runs ARGV[2] ms from now, 0 if it is gone.

local readers, owners, fence = KEYS[1], KEYS[2], KEYS[3]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local deadline = redis.call('ZSCORE', readers, ARGV[1])
if (not deadline) or tonumber(deadline) <= now then
  return 0
end
redis.call('ZADD', readers, string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
-- One absolute expiry for both reader keys (rw_read_acquire.lua has why).
local latest = string.format('%.0f', tonumber(last[2]))
redis.call('PEXPIREAT', readers, latest)
redis.call('PEXPIREAT', owners, latest)
local fence_at = tonumber(last[2]) + tonumber(ARGV[3])
local fence_expires = redis.call('PEXPIRETIME', fence)
if fence_expires >= 0 and fence_expires < fence_at then
  redis.call('PEXPIREAT', fence, string.format('%.0f', fence_at))
end
return 1
