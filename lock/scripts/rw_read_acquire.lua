-- rw_read_acquire: take a shared read hold in one round trip, unless a writer holds the lock
-- or goes first (a waiting writer's intent, or a writer ahead in the fair line), re-entering
-- owners excepted; a fair waiter that is refused joins the line (or refreshes its entry).
--
-- KEYS[1] write hash: <owner> = write hold count; '#'..<hold id> = that hold's lease deadline
-- KEYS[2] readers zset: read hold id -> lease deadline in server milliseconds
-- KEYS[3] read owners hash: <owner> = number of live read holds
-- KEYS[4] intents zset: waiting (non-fair) writer's hold id -> intent deadline in server ms
-- KEYS[5] fence string: the last write fencing token issued for this name
-- KEYS[6] line list: fair waiters' hold ids, head first
-- KEYS[7] waiters hash: hold id -> '<entry deadline in server ms> <lease TTL ms> <seq> <r|w>'
-- ARGV[1] hold id (<16 hex>:<owner>), unique per acquire call and reused by its retries
-- ARGV[2] owner
-- ARGV[3] lease TTL in ms
-- ARGV[4] fence margin in ms: the fence key outlives the latest read lease by this much, so
--         every hold of a read epoch (re-entries and renewals included) sees the same token
-- ARGV[5] line entry timeout in ms; '0' = never join the line (Spin, PubSub, try_read)
-- ARGV[6] attempt sequence number of this acquire call (named by a hand-off: rw_release.lua)
--
-- Returns {1, token} when the hold is granted (token: the last write epoch's token, '0' if
--         none; already-applied retries and hand-offs are idempotent and refresh the lease),
--         {0, ms} otherwise: ms until the blocking writer's lease, intent or line entry (or
--         the first reader's lease) ends, a bound for the next poll;
--         {0, ms, 1} the same for a fair reader (ARGV[5] > 0) held back by a non-fair
--         writer's intent: a mixed-strategy deployment, which the client warns about.
--
-- A reader is admitted while no other owner holds the write lock, no writer's intent lives
-- and no live writer entry stands in the line ahead of it (the whole line, for a reader not
-- in it), or when its owner already holds a read or the write hold (re-entry, downgrade):
-- new readers cannot starve a waiting writer, and a re-entering reader cannot deadlock
-- against one. Readers ahead of it in the line do not hold it back: a run of readers is one
-- phase (rw_release.lua grants such a run together), so only a writer separates phases.

local write, readers, owners, intents, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local line, waiters = KEYS[6], KEYS[7]
local hold, owner, ttl, margin = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local entry_timeout = tonumber(ARGV[5])

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
-- One absolute expiry for the two reader keys, so they expire together: two relative TTLs
-- set one after the other can land a millisecond apart on a Redis whose clock moves during
-- a script (before 7.2), and an owner count would outlive its holds.
local function expire_with_latest()
  local latest = tonumber(redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')[2])
  redis.call('PEXPIREAT', readers, string.format('%.0f', latest))
  redis.call('PEXPIREAT', owners, string.format('%.0f', latest))
  local fence_at = redis.call('PEXPIRETIME', fence)
  if fence_at >= 0 and fence_at < latest + margin then
    redis.call('PEXPIREAT', fence, string.format('%.0f', latest + margin))
  end
end

-- A granted hold leaves the line (a no-op for holds that never joined it).
local function leave_line()
  if redis.call('HDEL', waiters, hold) > 0 then
    redis.call('LREM', line, 0, hold)
  end
end

-- A retry of an applied grant, or a hand-off: the client's lease starts at this attempt's
-- send time, so the deadline moves to now + TTL (never earlier than it was).
local current = redis.call('ZSCORE', readers, hold)
if current then
  leave_line()
  if tonumber(current) < now + ttl then
    redis.call('ZADD', readers, string.format('%.0f', now + ttl), hold)
    expire_with_latest()
  end
  return {1, token()}
end

local writes_mine = redis.call('HEXISTS', write, owner) == 1
local reads_mine = redis.call('HEXISTS', owners, owner) == 1

-- Why this reader must wait, as ms until that may change (and true when a non-fair
-- writer's intent is the reason); nil when it may enter.
local function blocked()
  if redis.call('EXISTS', write) == 1 and not writes_mine then
    return redis.call('PTTL', write)
  end
  if reads_mine or writes_mine then
    return nil
  end
  local first_intent = redis.call('ZRANGE', intents, 0, 0, 'WITHSCORES')
  if first_intent[2] then
    return tonumber(first_intent[2]) - now, true
  end
  -- The first live writer entry in the line, up to this hold's own entry.
  local queued = redis.call('LRANGE', line, 0, -1)
  for _, id in ipairs(queued) do
    if id == hold then
      return nil
    end
    local entry = redis.call('HGET', waiters, id) or '0 0 0 r'
    local deadline, mode = string.match(entry, '^(%d+) %d+ %d+ (%a)$')
    if mode == 'w' and tonumber(deadline) > now then
      return tonumber(deadline) - now
    end
  end
  return nil
end

local wait, by_intent = blocked()
if not wait then
  leave_line()
  redis.call('ZADD', readers, string.format('%.0f', now + ttl), hold)
  redis.call('HINCRBY', owners, owner, 1)
  expire_with_latest()
  return {1, token()}
end

if entry_timeout > 0 then
  -- The list says who is in line, not the entries' hash: the two keys can part (an
  -- eviction takes one of them), and a refresh must then put the hold back in line.
  if not redis.call('LPOS', line, hold) then
    redis.call('RPUSH', line, hold)
  end
  redis.call('HSET', waiters, hold,
    string.format('%.0f %d %s r', now + entry_timeout, ttl, ARGV[6]))
  -- The line's keys live as long as their longest entry, never shorter.
  for _, key in ipairs({line, waiters}) do
    if redis.call('PEXPIRETIME', key) < now + entry_timeout then
      redis.call('PEXPIREAT', key, string.format('%.0f', now + entry_timeout))
    end
  end
end
local first_reader = redis.call('ZRANGE', readers, 0, 0, 'WITHSCORES')
if first_reader[2] then
  wait = math.min(wait, tonumber(first_reader[2]) - now)
end
-- A fair reader held back by a non-fair writer's intent (a mixed-strategy deployment: the
-- line's head and the intent block each other at a free lock) is told so, for the client
-- to warn.
if by_intent and entry_timeout > 0 then
  return {0, math.max(wait, 1), 1}
end
return {0, math.max(wait, 1)}
