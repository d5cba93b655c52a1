-- semaphore_probe: read-only check used after an ambiguous acquire: does this hold own a
-- permit, and for how long?
--
-- KEYS[1] permits zset: hold id -> lease deadline in server milliseconds
-- ARGV[1] hold id
--
-- Returns {1, '0', pttl} if the permit is live, {0, '', -2} otherwise. Writes nothing.

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
if deadline and tonumber(deadline) > now then
  return {1, '0', tonumber(deadline) - now}
end
return {0, '', -2}
