-- rw_read_release: drop one read hold and announce when the last reader has left.
--
-- KEYS[1] readers zset: read hold id -> lease deadline in server milliseconds
-- KEYS[2] read owners hash: <owner> = number of live read holds
-- ARGV[1] hold id, ARGV[2] owner
-- ARGV[3] channel to publish 'released' on when no reader is left
--
-- Idempotent: a retry after a lost reply finds the hold gone and changes nothing.
-- Returns the owner's remaining read hold count (>= 0), or -1 if this hold was not held
-- (never taken, already released, or its lease had expired by server time).

local readers, owners = KEYS[1], KEYS[2]
local hold, owner = ARGV[1], ARGV[2]

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local deadline = redis.call('ZSCORE', readers, hold)
if not deadline then
  return -1
end
redis.call('ZREM', readers, hold)
local left = redis.call('HINCRBY', owners, owner, -1)
if left <= 0 then
  redis.call('HDEL', owners, owner)
  left = 0
end
if redis.call('ZCARD', readers) == 0 then
  redis.call('DEL', owners)
  redis.call('PUBLISH', ARGV[3], 'released')
end
if tonumber(deadline) <= now then
  return -1
end
return left
