-- rw_write_acquire: take (or re-enter) the exclusive write hold, or record that a writer
-- waits so that no new reader is admitted until it has had its turn (writer preference):
-- a fair waiter by its entry in the line, any other waiting writer by an intent.
--
-- KEYS[1] write hash: <owner> = write hold count; '#'..<hold id> = that hold's lease
--         deadline in server ms (each hold a lease of its own, as in acquire.lua)
-- KEYS[2] readers zset: read hold id -> lease deadline in server milliseconds
-- KEYS[3] read owners hash: <owner> = number of live read holds
-- KEYS[4] intents zset: waiting writer's hold id -> intent deadline in server milliseconds
-- KEYS[5] fence string: the last write fencing token issued for this name
-- KEYS[6] line list: fair waiters' hold ids, head first
-- KEYS[7] waiters hash: hold id -> '<entry deadline in server ms> <lease TTL ms> <seq> <r|w>'
-- ARGV[1] hold id (<16 hex>:<owner>), unique per acquire call and reused by its retries
-- ARGV[2] owner
-- ARGV[3] lease TTL in ms
-- ARGV[4] intent timeout in ms; '0' = do not record an intent (try_lock)
-- ARGV[5] fence margin in ms: how long the fence key outlives the write hash (see acquire.lua)
-- ARGV[6] longest poll interval in ms for a waiting writer (it must refresh its intent)
-- ARGV[7] line entry timeout in ms; '0' = never join the line (Spin, PubSub, try_write)
-- ARGV[8] attempt sequence number of this acquire call (named by a hand-off: rw_release.lua)
--
-- Returns {1, token} when the hold owns the write lock: fresh (new token), re-entered (the
--         epoch's token) or already applied (a retry, or a hand-off: idempotent, no second
--         count);
--         {0, ms} when busy: ms until the holder's lease (or the first reader's) ends, or,
--         when the lock is free but a live waiter heads the line, that head's remaining
--         entry time; capped by ARGV[6] for a writer recording an intent;
--         {0, ms, 1} the same for a writer outside the line (ARGV[7] '0') that found a live
--         waiter in it: a mixed-strategy deployment, which the client warns about;
--         {2, 0} when the owner holds read locks but not the write lock: an upgrade would
--         wait for itself, so it is refused.

local write, readers, owners, intents, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local line, waiters = KEYS[6], KEYS[7]
local hold, owner = ARGV[1], ARGV[2]
local ttl, intent, margin, poll = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local entry_timeout = tonumber(ARGV[7])
local hold_field = '#' .. hold

local time = redis.call('TIME')
local now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
local now = math.floor(now_us / 1000)

-- Same purge as rw_read_acquire.lua: crashed readers and crashed waiting writers leave.
local dead = redis.call('ZRANGEBYSCORE', readers, '-inf', now)
for _, gone in ipairs(dead) do
  local gone_owner = string.sub(gone, 18)
  if redis.call('HINCRBY', owners, gone_owner, -1) <= 0 then
    redis.call('HDEL', owners, gone_owner)
  end
end
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
redis.call('ZREMRANGEBYSCORE', intents, '-inf', now)

-- A new write epoch: max(last + 1, server µs), as in acquire.lua.
local function issue_token()
  local last = tonumber(redis.call('GET', fence) or '0')
  local token = now_us
  if token <= last then
    token = last + 1
  end
  local text = string.format('%.0f', token)
  redis.call('SET', fence, text, 'PXAT', string.format('%.0f', now + ttl + margin))
  return text
end

-- Sets the hold's deadline to now + TTL and extends the write hash's TTL to at least the
-- granted lease; never shortens it (another write hold of the owner may trust a longer
-- lease).
local function granted(token)
  redis.call('HSET', write, hold_field, string.format('%.0f', now + ttl))
  local write_at = redis.call('PEXPIRETIME', write)
  if write_at < now + ttl then
    write_at = now + ttl
    redis.call('PEXPIREAT', write, string.format('%.0f', write_at))
  end
  if redis.call('PEXPIRETIME', fence) < write_at + margin then
    redis.call('PEXPIREAT', fence, string.format('%.0f', write_at + margin))
  end
  redis.call('ZREM', intents, hold)
  if redis.call('HDEL', waiters, hold) > 0 then
    redis.call('LREM', line, 0, hold)
  end
  return {1, token}
end

-- The owner's write holds whose deadline passed (a release lost on the way) leave first,
-- as in acquire.lua: its epoch lasts while one of its holds is live, no longer.
local mine = redis.call('HMGET', write, hold_field, owner)
if mine[2] then
  local fields = redis.call('HGETALL', write)
  local live = 0
  for i = 1, #fields, 2 do
    if string.sub(fields[i], 1, 1) == '#' then
      if (tonumber(fields[i + 1]) or 0) > now then
        live = live + 1
      else
        redis.call('HDEL', write, fields[i])
        if fields[i] == hold_field then
          mine[1] = false
        end
      end
    end
  end
  if live == 0 then
    redis.call('DEL', write)
    mine[2] = false
  elseif live ~= tonumber(mine[2]) then
    redis.call('HSET', write, owner, live)
  end
end

if mine[1] then
  return granted(redis.call('GET', fence) or issue_token())
end

if mine[2] then
  local token = redis.call('GET', fence) or issue_token()
  redis.call('HINCRBY', write, owner, 1)
  return granted(token)
end

if redis.call('HEXISTS', owners, owner) == 1 then
  return {2, 0}
end

-- The line's live head: entries whose deadline passed (crashed waiters) leave first.
local head, head_deadline
repeat
  head = redis.call('LINDEX', line, 0)
  local entry = head and redis.call('HGET', waiters, head)
  head_deadline = tonumber(entry and string.match(entry, '^%d+') or '0')
  if head and head_deadline <= now then
    redis.call('LPOP', line)
    redis.call('HDEL', waiters, head)
  end
until (not head) or head_deadline > now

local free = redis.call('EXISTS', write) == 0 and redis.call('ZCARD', readers) == 0
if free and ((not head) or head == hold) then
  local token = issue_token()
  redis.call('HSET', write, owner, 1)
  return granted(token)
end

if entry_timeout > 0 then
  -- The list says who is in line, not the entries' hash: the two keys can part (an
  -- eviction takes one of them), and a refresh must then put the hold back in line.
  if not redis.call('LPOS', line, hold) then
    redis.call('RPUSH', line, hold)
  end
  redis.call('HSET', waiters, hold,
    string.format('%.0f %d %s w', now + entry_timeout, ttl, ARGV[8]))
  -- The line's keys live as long as their longest entry, never shorter.
  for _, key in ipairs({line, waiters}) do
    if redis.call('PEXPIRETIME', key) < now + entry_timeout then
      redis.call('PEXPIREAT', key, string.format('%.0f', now + entry_timeout))
    end
  end
end
if intent > 0 then
  redis.call('ZADD', intents, string.format('%.0f', now + intent), hold)
  if redis.call('PEXPIRETIME', intents) < now + intent then
    redis.call('PEXPIREAT', intents, string.format('%.0f', now + intent))
  end
end

local wait
if free then
  wait = head_deadline - now
else
  wait = redis.call('PTTL', write)
  if wait < 0 then
    local first_reader = redis.call('ZRANGE', readers, 0, 0, 'WITHSCORES')
    wait = tonumber(first_reader[2]) - now
  end
end
if intent > 0 then
  wait = math.min(wait, poll)
end
-- A writer outside the line that finds a live waiter in it (a mixed-strategy deployment: a
-- fair reader at the head and this writer's intent block each other at a free lock) is
-- told so, for the client to warn.
if entry_timeout == 0 and head and head ~= hold then
  return {0, wait, 1}
end
return {0, wait}
