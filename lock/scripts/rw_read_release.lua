-- rw_read_release: drop one read hold (unlock, abandoned acquire, waiter giving up) and, when
-- no reader is left and no writer holds the lock, hand it to the fair line's head: a writer
-- alone, or every reader from the head up to the first writer at once.
--
-- KEYS[1] readers zset: read hold id -> lease deadline in server milliseconds
-- KEYS[2] read owners hash: <owner> = number of live read holds
-- KEYS[3] write hash (see rw_write_acquire.lua)
-- KEYS[4] fence string: the last write token (see rw_write_acquire.lua)
-- KEYS[5] line list: fair waiters' hold ids, head first
-- KEYS[6] waiters hash: hold id -> '<entry deadline in server ms> <lease TTL ms> <seq> <r|w>'
-- ARGV[1] hold id, ARGV[2] owner
-- ARGV[3] channel to publish 'released' on when the last reader leaves (for PubSub
--         waiters), unless a writer was handed the lock
-- ARGV[4] fence margin in ms: the fence key lives this long past the latest read lease
-- ARGV[5] inbox channel prefix: a hand-off is published to prefix..<waiter's client id>
--
-- The hand-off below is rw_write_release.lua's, line for line (a script cannot share
-- code with another). A hand-off is a grant, as in release.lua: the waiter's hold is written (a writer: a new
-- epoch with a new token; a reader: the last write token, '0' if none), with a lease of
-- its TTL cut to its entry deadline, and announced to its client as '<token> <lease ms>
-- <seq> <hold id>', seq naming the attempt of the waiter's last refresh this server ran
-- (which set the entry deadline, so the lease ends no earlier than that attempt's send
-- time + min(TTL, entry timeout): the waiter's lower bound). A waiter whose message is
-- lost finds the grant at its next refresh (an applied grant), and one that gave up
-- releases it like any hold. Entries whose deadline passed (crashed waiters) are skipped.
--
-- Phases: a writer is handed the lock only when no reader is live, and readers only while
-- no writer holds it; the reader run stops at the first live writer entry, so no reader is
-- granted past a writer that queued before it, and the writer gets the lock when that run
-- has left. The line's head and its entry, and the fence, are read before the first write,
-- so a foreign value there (WRONGTYPE) fails the release with the hold and line as they
-- were.
--
-- Idempotent: a retry after a lost reply finds the hold gone and changes nothing.
-- Returns the owner's remaining read hold count (>= 0), or -1 if this hold was not held
-- (never taken, already released, or its lease had expired by server time).

local readers, owners, write, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local line, waiters = KEYS[5], KEYS[6]
local hold, owner = ARGV[1], ARGV[2]
local released, margin, inbox = ARGV[3], tonumber(ARGV[4]), ARGV[5]

local time = redis.call('TIME')
local now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
local now = math.floor(now_us / 1000)

-- The hold's lease deadline, or nil if it is not held.
local mine = redis.call('ZSCORE', readers, hold)
if not mine then
  -- A waiter giving up leaves the line (a no-op for holds that never joined it).
  if redis.call('HDEL', waiters, hold) > 0 then
    redis.call('LREM', line, 0, hold)
  end
  return -1
end

-- What a hand-off reads, read before the first write (see the header).
local head = redis.call('LINDEX', line, 0)
local entry, last
if head then
  entry = redis.call('HGET', waiters, head)
  last = redis.call('GET', fence)
end

local answer = tonumber(mine) <= now and -1 or 0
redis.call('ZREM', readers, hold)
local left = redis.call('HINCRBY', owners, owner, -1)
if left <= 0 then
  redis.call('HDEL', owners, owner)
elseif answer == 0 then
  answer = left
end
-- The write lock held (by this owner, between a downgrade's read grant and its write
-- release): nobody can be handed the lock.
if redis.call('EXISTS', write) == 1 then
  return answer
end

-- The latest live read lease's deadline, 0 if no reader is live.
local function latest_read()
  local latest = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
  local deadline = tonumber(latest[2] or '0')
  return deadline > now and deadline or 0
end

local readers_live = latest_read() > 0
local granted_readers, granted_writer = false, false
while head do
  local deadline, ttl, seq, mode = string.match(entry or '', '^(%d+) (%d+) (%d+) (%a)$')
  deadline = tonumber(deadline or '0')
  if deadline > now and mode == 'w' and (readers_live or granted_readers) then
    break
  end
  redis.call('LPOP', line)
  redis.call('HDEL', waiters, head)
  if deadline > now then
    local lease = math.min(tonumber(ttl), deadline - now)
    local owner_of, expiry = string.sub(head, 18), string.format('%.0f', now + lease)
    local token
    if mode == 'w' then
      token = string.format('%.0f', math.max(tonumber(last or '0') + 1, now_us))
      redis.call('SET', fence, token, 'PXAT', string.format('%.0f', now + lease + margin))
      redis.call('HSET', write, owner_of, 1, '#' .. head, expiry)
      redis.call('PEXPIREAT', write, expiry)
      granted_writer = true
    else
      token = last or '0'
      redis.call('ZADD', readers, expiry, head)
      redis.call('HINCRBY', owners, owner_of, 1)
      granted_readers = true
    end
    redis.call('PUBLISH', inbox .. string.sub(head, 18, 49),
      string.format('%s %d %s %s', token, lease, seq, head))
    if granted_writer then
      return answer
    end
  end
  head = redis.call('LINDEX', line, 0)
  entry = head and redis.call('HGET', waiters, head)
end

if granted_readers then
  -- Every reader key lives as long as the latest read lease, and the fence key the margin
  -- past it, one absolute expiry for both reader keys (as in rw_read_acquire.lua).
  local latest = latest_read()
  redis.call('PEXPIREAT', readers, string.format('%.0f', latest))
  redis.call('PEXPIREAT', owners, string.format('%.0f', latest))
  local fence_at = redis.call('PEXPIRETIME', fence)
  if fence_at >= 0 and fence_at < latest + margin then
    redis.call('PEXPIREAT', fence, string.format('%.0f', latest + margin))
  end
elseif redis.call('ZCARD', readers) == 0 then
  redis.call('DEL', owners)
  redis.call('PUBLISH', released, 'released')
end
return answer
