-- semaphore_resize: change a live semaphore's stored size on purpose, and hand permits
-- the new size frees to fair waiters in line.
--
-- KEYS[1] permits zset, KEYS[2] queue list, KEYS[3] waiters hash, KEYS[4] size string
-- (see semaphore_acquire.lua)
-- ARGV[1] the new number of permits (at least 1; the client checks it)
-- ARGV[2] channel to publish 'released' on when a permit is free with nobody queued
-- ARGV[3] inbox channel prefix (see semaphore_acquire.lua)
--
-- Returns 1 if the semaphore was live (holders or waiters) and now stores ARGV[1]; 0 if it
-- was idle: nothing is stored, and the next acquire's number becomes the size.
--
-- Holders granted under the old size keep their permits when it shrinks: new ones are
-- admitted only once fewer than the new size hold one. Idempotent, so a retry after a
-- lost reply is safe.

local permits, queue, waiters, size = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local limit = tonumber(ARGV[1])

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

redis.call('ZREMRANGEBYSCORE', permits, '-inf', now)
-- Absolute expiries, as semaphore_acquire.lua carries them to the size key.
local function latest_expiry()
  return math.max(redis.call('PEXPIRETIME', permits), redis.call('PEXPIRETIME', queue),
    redis.call('PEXPIRETIME', waiters))
end
local live = latest_expiry()
if live <= now then
  redis.call('DEL', size)
  return 0
end
redis.call('SET', size, limit, 'PXAT', live)

while redis.call('ZCARD', permits) < limit do
  local head = redis.call('LPOP', queue)
  if not head then
    break
  end
  local entry = tonumber(redis.call('HGET', waiters, head) or '0')
  redis.call('HDEL', waiters, head)
  if entry > now then
    redis.call('ZADD', permits, string.format('%.0f', entry), head)
    redis.call('PUBLISH', ARGV[3] .. string.sub(head, 18, 49), head)
  end
end
local latest = redis.call('ZRANGE', permits, -1, -1, 'WITHSCORES')
if latest[2] then
  redis.call('PEXPIREAT', permits, string.format('%.0f', tonumber(latest[2])))
end
-- Hand-offs may have emptied the queue: the size lives as long as what is left.
live = latest_expiry()
if live > now then
  redis.call('PEXPIREAT', size, live)
else
  redis.call('DEL', size)
end
if redis.call('ZCARD', permits) < limit then
  redis.call('PUBLISH', ARGV[2], 'released')
end
return 1
