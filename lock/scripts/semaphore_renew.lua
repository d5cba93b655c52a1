-- semaphore_renew: extend a live permit's lease (watchdog, extend). Never creates a permit,
-- so a late renewal after a release or expiry cannot resurrect it.
--
-- KEYS[1] permits zset: hold id -> lease deadline in server milliseconds
-- ARGV[1] hold id, ARGV[2] lease TTL in ms
--
-- Returns 1 if the permit is live and its lease now runs ARGV[2] ms from now, 0 if gone.

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
if (not deadline) or tonumber(deadline) <= now then
  return 0
end
redis.call('ZADD', KEYS[1], string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], tonumber(last[2]) - now)
return 1
