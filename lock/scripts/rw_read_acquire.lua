-- rw_read_acquire: take a shared read hold in one round trip, unless a writer holds the lock
-- or waits for it (writer preference), re-entering owners excepted.
--
-- KEYS[1] write hash: <owner> = write hold count; '#'..<hold id> = that hold's lease deadline
-- KEYS[2] readers zset: read hold id -> lease deadline in server milliseconds
-- KEYS[3] read owners hash: <owner> = number of live read holds
-- KEYS[4] intents zset: waiting writer's hold id -> intent deadline in server milliseconds
-- KEYS[5] fence string: the last write fencing token issued for this name
-- ARGV[1] hold id (<16 hex>:<owner>), unique per acquire call and reused by its retries
-- ARGV[2] owner
-- ARGV[3] lease TTL in ms
-- ARGV[4] fence margin in ms: the fence key outlives the latest read lease by this much, so
--         every hold of a read epoch (re-entries and renewals included) sees the same token
--
-- Returns {1, token} when the hold is granted (token: the last write epoch's token, '0' if
--         none; already-applied retries are idempotent and refresh the lease),
--         {0, pttl} otherwise: ms until the blocking writer's lease or intent (or the first
--         reader's lease) ends, a bound for the next poll.
--
-- A reader is admitted while no other owner holds the write lock and no writer waits, or
-- when its owner already holds a read or the write hold (re-entry, downgrade): new readers
-- cannot starve a waiting writer, and a re-entering reader cannot deadlock against one.

local write, readers, owners, intents, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local hold, owner, ttl, margin = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

-- Expired read leases (crashed readers) leave, and their owners' counts with them; expired
-- writer intents (crashed waiting writers) stop blocking readers.
local dead = redis.call('ZRANGEBYSCORE', readers, '-inf', now)
for _, gone in ipairs(dead) do
  local gone_owner = string.sub(gone, 18)
  if redis.call('HINCRBY', owners, gone_owner, -1) <= 0 then
    redis.call('HDEL', owners, gone_owner)
  end
end
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
redis.call('ZREMRANGEBYSCORE', intents, '-inf', now)

local function token()
  return redis.call('GET', fence) or '0'
end

-- Keeps every reader key alive as long as the latest read lease, and the last write epoch's
-- fence key the margin past it: a read epoch never outlives the token its holds carry.
local function expire_with_latest()
  local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
  local left = tonumber(last[2]) - now
  redis.call('PEXPIRE', readers, left)
  redis.call('PEXPIRE', owners, left)
  local fence_left = redis.call('PTTL', fence)
  if fence_left >= 0 and fence_left < left + margin then
    redis.call('PEXPIRE', fence, left + margin)
  end
end

-- A retry of an applied grant: the client's lease starts at this retry's send time, so the
-- deadline moves to now + TTL (never earlier than it was).
local current = redis.call('ZSCORE', readers, hold)
if current then
  if tonumber(current) < now + ttl then
    redis.call('ZADD', readers, string.format('%.0f', now + ttl), hold)
    expire_with_latest()
  end
  return {1, token()}
end

local writes_mine = redis.call('HEXISTS', write, owner) == 1
if redis.call('EXISTS', write) == 1 and not writes_mine then
  return {0, redis.call('PTTL', write)}
end

local reads_mine = redis.call('HEXISTS', owners, owner) == 1
if not (reads_mine or writes_mine) then
  local first_intent = redis.call('ZRANGE', intents, 0, 0, 'WITHSCORES')
  if first_intent[2] then
    local wait = tonumber(first_intent[2]) - now
    local first_reader = redis.call('ZRANGE', readers, 0, 0, 'WITHSCORES')
    if first_reader[2] then
      wait = math.min(wait, tonumber(first_reader[2]) - now)
    end
    return {0, wait}
  end
end

redis.call('ZADD', readers, string.format('%.0f', now + ttl), hold)
redis.call('HINCRBY', owners, owner, 1)
expire_with_latest()
return {1, token()}
