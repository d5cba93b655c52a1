-- rw_write_release: drop one write hold (unlock, abandoned acquire, writer giving up) and,
-- when the write lock becomes free, hand it to the fair line's head: a writer alone, once no
-- reader is left, or every reader from the head up to the first writer at once. A waiter
-- that gives up leaves the line, and while no writer holds the lock the line is handed on
-- the same way: the readers a departing writer's entry held back enter at once.
--
-- KEYS[1] write hash (see rw_write_acquire.lua)
-- KEYS[2] intents zset: waiting (non-fair) writer's hold id -> intent deadline in server ms
-- KEYS[3] fence string: the last write token (see rw_write_acquire.lua)
-- KEYS[4] readers zset: read hold id -> lease deadline in server milliseconds
-- KEYS[5] read owners hash: <owner> = number of live read holds
-- KEYS[6] line list: fair waiters' hold ids, head first
-- KEYS[7] waiters hash: hold id -> '<entry deadline in server ms> <lease TTL ms> <seq> <r|w>'
-- ARGV[1] hold id, ARGV[2] owner
-- ARGV[3] channel to publish 'released' on when the write lock becomes free (for PubSub
--         waiters), unless a writer was handed the lock
-- ARGV[4] fence margin in ms: how long the fence key lives once the write lock is free
--         (past the latest read lease while a reader lives)
-- ARGV[5] inbox channel prefix: a hand-off is published to prefix..<waiter's client id>
--
-- The hand-off (hand_off below) is rw_read_release.lua's, line for line (a script cannot share
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
-- Returns the owner's remaining write hold count (>= 0), or -1 if this hold was not held,
-- or if its own deadline had passed (it is dropped all the same).

local write, intents, fence, readers, owners = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local line, waiters = KEYS[6], KEYS[7]
local hold, owner = ARGV[1], ARGV[2]
local released, margin, inbox = ARGV[3], tonumber(ARGV[4]), ARGV[5]

local time = redis.call('TIME')
local now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
local now = math.floor(now_us / 1000)

-- The latest live read lease's deadline, 0 if no reader is live.
local function latest_read()
  local latest = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
  local deadline = tonumber(latest[2] or '0')
  return deadline > now and deadline or 0
end

-- Hands the free write lock to the line from `head` (its entry `entry`; `last` the fence's
-- value, read before the script's first write) as the header says. Returns whether it
-- granted anyone.
local function hand_off(head, entry, last)
  local readers_live = latest_read() > 0
  local granted_readers = false
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
      else
        token = last or '0'
        redis.call('ZADD', readers, expiry, head)
        redis.call('HINCRBY', owners, owner_of, 1)
        granted_readers = true
      end
      redis.call('PUBLISH', inbox .. string.sub(head, 18, 49),
        string.format('%s %d %s %s', token, lease, seq, head))
      if mode == 'w' then
        return true
      end
    end
    head = redis.call('LINDEX', line, 0)
    entry = head and redis.call('HGET', waiters, head)
  end
  if granted_readers then
    -- Every reader key lives as long as the latest read lease, and the fence key the
    -- margin past it, one absolute expiry for both reader keys (as in
    -- rw_read_acquire.lua).
    local latest = latest_read()
    redis.call('PEXPIREAT', readers, string.format('%.0f', latest))
    redis.call('PEXPIREAT', owners, string.format('%.0f', latest))
    local fence_at = redis.call('PEXPIRETIME', fence)
    if fence_at >= 0 and fence_at < latest + margin then
      redis.call('PEXPIREAT', fence, string.format('%.0f', latest + margin))
    end
  end
  return granted_readers
end

-- A waiting writer giving up withdraws its intent (a no-op for other holds).
redis.call('ZREM', intents, hold)
-- The hold's lease deadline, or nil if it is not held.
local mine = redis.call('HGET', write, '#' .. hold)
if not mine then
  -- A waiter giving up leaves the line (a no-op for holds that never joined it). While no
  -- writer holds the lock, the line is handed on: a writer's entry may have been all that
  -- kept the readers behind it waiting (the fence is read before the first write).
  if redis.call('HEXISTS', waiters, hold) == 1 then
    local last = redis.call('GET', fence)
    redis.call('HDEL', waiters, hold)
    redis.call('LREM', line, 0, hold)
    if redis.call('EXISTS', write) == 0 then
      local head = redis.call('LINDEX', line, 0)
      if head then
        hand_off(head, redis.call('HGET', waiters, head), last)
      end
    end
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

-- A hold whose own deadline had passed answers -1 when a sibling of its owner kept the hash
-- alive (as in release.lua).
local answer = 0
redis.call('HDEL', write, '#' .. hold)
-- The owner's other write holds stay while live; those whose deadline passed leave too,
-- and the hash lives until the latest live deadline (see acquire.lua's header).
if redis.call('HINCRBY', write, owner, -1) > 0 then
  answer = tonumber(mine) <= now and -1 or 0
  local fields = redis.call('HGETALL', write)
  local live, latest = 0, 0
  for i = 1, #fields, 2 do
    if string.sub(fields[i], 1, 1) == '#' then
      local deadline = tonumber(fields[i + 1]) or 0
      if deadline > now then
        live = live + 1
        latest = math.max(latest, deadline)
      else
        redis.call('HDEL', write, fields[i])
      end
    end
  end
  if live > 0 then
    redis.call('HSET', write, owner, live)
    redis.call('PEXPIREAT', write, string.format('%.0f', latest))
    return answer == 0 and live or answer
  end
end
redis.call('DEL', write)
-- The fence key lives the margin past the write epoch, and past the latest live read lease
-- (a downgrade's read hold, or readers of the epoch before): a read renewal only extends a
-- fence key it finds, so one cut to the margin under a live read epoch would expire before
-- the next renewal when the margin is short, and that epoch's later holds would carry
-- token 0 (see rwlock.rs: every hold of a read epoch carries the last write token).
local read_deadline = latest_read()
local readers_live = read_deadline > 0
redis.call('PEXPIREAT', fence, string.format('%.0f', margin + (readers_live and read_deadline or now)))
if not hand_off(head, entry, last) then
  redis.call('PUBLISH', released, 'released')
end
return answer
