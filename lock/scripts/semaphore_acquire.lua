-- semaphore_acquire: take one permit (a lease of its own), claim a permit handed over by a
-- release, or (fair mode) wait in line. The semaphore's size is stored at first use.
--
-- KEYS[1] permits zset: hold id -> lease deadline in server milliseconds (a handed permit
--         not yet claimed carries its waiter's queue entry deadline)
-- KEYS[2] queue list: hold ids of fair waiters, head first
-- KEYS[3] waiters hash: hold id -> entry deadline in server milliseconds
-- KEYS[4] size string: the stored number of permits (KEYS[1]..':size', the same hash tag)
-- ARGV[1] hold id (<16 hex>:<client 32 hex>:...), unique per acquire call
-- ARGV[2] number of permits: stored if none is; must equal the stored number otherwise
-- ARGV[3] lease TTL in ms
-- ARGV[4] queue entry timeout in ms; '0' = never queue (Spin, PubSub, try_acquire)
-- ARGV[5] inbox channel prefix (see release.lua): hand-offs are published to
--         prefix..<waiter's client id> with the waiter's hold id as the message
--
-- Returns {1, '0'} when the hold owns a permit (fresh, handed over, or an applied retry);
--         {0, pttl} otherwise: ms until the earliest permit lease ends (a poll bound);
--         {-1, stored} when ARGV[2] differs from the stored size (nothing written but the
--         purge of expired permits).
--
-- The size key lives exactly as long as the longest of the other three keys, so an idle
-- semaphore forgets its size and the next first acquire stores it again.

local permits, queue, waiters, size = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local hold, limit = ARGV[1], tonumber(ARGV[2])
local ttl, entry_timeout, inbox = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

-- Permits of crashed holders come back.
redis.call('ZREMRANGEBYSCORE', permits, '-inf', now)
local mine = redis.call('ZSCORE', permits, hold)
local stored = redis.call('GET', size)
if stored then
  -- A hold admitted already (a retry) keeps its permit even if the size changed since.
  if tonumber(stored) ~= limit and not mine then
    return {-1, stored}
  end
  limit = tonumber(stored)
else
  redis.call('SET', size, limit)
end

-- The size lives exactly as long as the longest of the other keys (an acquire always
-- leaves the permits zset, so there is one). Absolute expiries, not PTTLs: Redis before
-- 7.2 reads a moving clock for each PTTL and PEXPIRE in a script, so a relative TTL
-- carried across a millisecond would outlive its source by one.
local function keep_size()
  redis.call('PEXPIREAT', size, math.max(redis.call('PEXPIRETIME', permits),
    redis.call('PEXPIRETIME', queue), redis.call('PEXPIRETIME', waiters)))
end

-- Free permits go to live queue heads, in order.
while redis.call('ZCARD', permits) < limit do
  local head = redis.call('LPOP', queue)
  if not head then
    break
  end
  local deadline = tonumber(redis.call('HGET', waiters, head) or '0')
  redis.call('HDEL', waiters, head)
  if deadline > now then
    redis.call('ZADD', permits, string.format('%.0f', deadline), head)
    if head ~= hold then
      redis.call('PUBLISH', inbox .. string.sub(head, 18, 49), head)
    end
  end
end
-- The zset lives as long as its latest deadline (handed permits included).
local latest = redis.call('ZRANGE', permits, -1, -1, 'WITHSCORES')
if latest[2] then
  redis.call('PEXPIREAT', permits, string.format('%.0f', tonumber(latest[2])))
end

-- Ours already (a retry, or handed over just now or by a release), or free with nobody
-- queued (the loop above emptied the queue if any permit is free). GT: a claim only ever
-- moves a deadline later, as a renewal does (semaphore_renew.lua): a handed permit keeps
-- its entry deadline, which a waiter whose claim went unanswered learned from the probe
-- and trusts. So a claimed hand-off's lease runs to the later of its entry deadline (at
-- most the entry timeout after the waiter's last refresh) and the claim's TTL: a holder that
-- crashes right after its claim keeps the permit that long.
if redis.call('ZSCORE', permits, hold) or redis.call('ZCARD', permits) < limit then
  redis.call('ZADD', permits, 'GT', string.format('%.0f', now + ttl), hold)
  redis.call('LREM', queue, 0, hold)
  redis.call('HDEL', waiters, hold)
  local last = redis.call('ZRANGE', permits, -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', permits, string.format('%.0f', tonumber(last[2])))
  keep_size()
  return {1, '0'}
end

if entry_timeout > 0 then
  local deadline = string.format('%.0f', now + entry_timeout)
  -- The list says who is in line, not the entries' hash: the two keys can part (an
  -- eviction takes one of them), and a refresh must then put the hold back in line.
  if not redis.call('LPOS', queue, hold) then
    redis.call('RPUSH', queue, hold)
  end
  redis.call('HSET', waiters, hold, deadline)
  for _, key in ipairs({queue, waiters}) do
    if redis.call('PEXPIRETIME', key) < now + entry_timeout then
      redis.call('PEXPIREAT', key, deadline)
    end
  end
end
keep_size()
local first = redis.call('ZRANGE', permits, 0, 0, 'WITHSCORES')
if first[2] then
  return {0, tonumber(first[2]) - now}
end
return {0, -2}
