-- rw_read_probe: read-only check used after an ambiguous read acquire: does this read hold
-- live, with which write token, for how long?
--
-- KEYS[1] readers zset: read hold id -> lease deadline in server milliseconds
-- KEYS[2] fence string
-- ARGV[1] hold id
--
-- Returns {1, token, pttl} if the hold is live, {0, '', -2} otherwise. Writes nothing.

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
if deadline and tonumber(deadline) > now then
  return {1, redis.call('GET', KEYS[2]) or '0', tonumber(deadline) - now}
end
return {0, '', -2}
