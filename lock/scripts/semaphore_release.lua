-- semaphore_release: give one permit back (release, abandoned acquire, waiter giving up) and
-- hand it to the first live fair waiter, or announce that a permit is free.
--
-- KEYS[1] permits zset, KEYS[2] queue list, KEYS[3] waiters hash, KEYS[4] size string
-- (see semaphore_acquire.lua)
-- ARGV[1] hold id, ARGV[2] number of permits (used only when no size is stored)
-- ARGV[3] channel to publish 'released' on when a permit is free with nobody queued
-- ARGV[4] inbox channel prefix (see semaphore_acquire.lua)
--
-- Idempotent: a retry after a lost reply finds the hold gone and changes nothing.
-- Returns 0 if the permit was held, -1 if not (never taken, already released, or its lease
-- had expired by server time).

local permits, queue, waiters, size = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local hold = ARGV[1]
-- Giving a permit back never fails: the stored size rules, the caller's only stands in.
local limit = tonumber(redis.call('GET', size) or ARGV[2])

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

-- The size key lives exactly as long as the longest of the other three keys (absolute
-- expiries: see semaphore_acquire.lua).
local function keep_size()
  local live = math.max(redis.call('PEXPIRETIME', permits), redis.call('PEXPIRETIME', queue),
    redis.call('PEXPIRETIME', waiters))
  if live > now then
    redis.call('PEXPIREAT', size, live)
  else
    redis.call('DEL', size)
  end
end

-- A waiter giving up leaves the line (a no-op for holds that never queued).
redis.call('LREM', queue, 0, hold)
redis.call('HDEL', waiters, hold)

local deadline = redis.call('ZSCORE', permits, hold)
if not deadline then
  keep_size()
  return -1
end
redis.call('ZREM', permits, hold)

redis.call('ZREMRANGEBYSCORE', permits, '-inf', now)
while redis.call('ZCARD', permits) < limit do
  local head = redis.call('LPOP', queue)
  if not head then
    break
  end
  local entry = tonumber(redis.call('HGET', waiters, head) or '0')
  redis.call('HDEL', waiters, head)
  if entry > now then
    redis.call('ZADD', permits, string.format('%.0f', entry), head)
    redis.call('PUBLISH', ARGV[4] .. string.sub(head, 18, 49), head)
  end
end
-- The zset lives as long as its latest deadline (handed permits included).
local latest = redis.call('ZRANGE', permits, -1, -1, 'WITHSCORES')
if latest[2] then
  redis.call('PEXPIREAT', permits, string.format('%.0f', tonumber(latest[2])))
end
keep_size()
if redis.call('ZCARD', permits) < limit then
  redis.call('PUBLISH', ARGV[3], 'released')
end

if tonumber(deadline) <= now then
  return -1
end
return 0
