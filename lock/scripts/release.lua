-- release: drop one hold (unlock, abandoned acquire, waiter giving up) and, when the lock
-- becomes free, grant it outright to the first live fair waiter, or announce it is free.
--
-- KEYS[1] lock key: a lone hold's string or the lock hash (see acquire.lua)
-- KEYS[2] queue list of fair waiters' hold ids, head first
-- KEYS[3] waiters hash: hold id -> '<entry deadline in server ms> <lease TTL ms> <seq>'
-- KEYS[4] fence string (see acquire.lua)
-- ARGV[1] hold id (<16 hex>:<client 32 hex>:...), ARGV[2] owner
-- ARGV[3] channel to publish 'released' on when the lock is free and a waiter listens
-- ARGV[4] inbox channel prefix: a hand-off is published to prefix..<head's client id>
-- ARGV[5] fence margin in ms: once the lock is free the fence key lives this long (past a
--         hand-off's lease, when there is one), so an idle name keeps no key longer
--
-- The hand-off is a grant: a new epoch for the head's owner (a new token, its hold
-- counted) with a lease of the head's TTL, cut to the head's entry deadline, announced to
-- the head's client as '<token> <lease ms> <seq> <hold id>', where seq is the attempt
-- number of the head's last refresh this server ran (the hold id goes last, whole: the
-- owner id in it may contain spaces). That refresh was sent before this grant and set the
-- deadline to its own run + the entry timeout, so the lease ends no earlier than its send
-- time + min(TTL, entry timeout): the waiter's lower bound. The cut keeps a waiter that
-- died since its last refresh from blocking the line past its entry deadline, as before
-- any hand-off. A waiter whose message is lost finds the grant
-- at its next refresh (acquire.lua: already ours, which also extends the lease to its
-- TTL); one that gave up releases it like any hold.
--
-- The uncontended release of a lone hold in string form (acquire.lua's header) costs MGET
-- and DEL: a string carries no queue or listener flag, so there is nobody to hand off to
-- or tell. Its fence key keeps the expiry the grant (or the last renewal) gave it, the
-- lease + margin, rather than being cut to the margin: tokens only need the fence key to
-- live at least the margin past the lock, and an idle name's keys are still gone within
-- the lease + margin of its last grant. The release of a hash costs MGET, HMGET, DEL and
-- the fence key's PEXPIRE; one of several holds of an owner also reads TIME and the hash,
-- to drop siblings whose own lease ended (acquire.lua's header has why). A hash whose '~q'
-- flag is set also reads the fence (GET) and the line's head (LINDEX, and HGET its entry)
-- before its first write (see below). A hand-off costs MGET, HMGET, GET (the fence), LINDEX
-- and HGET (the head and its entry), DEL, TIME, LPOP and HDEL (the head), SET (the fence),
-- one HSET for the new hold and its flags, PEXPIREAT and PUBLISH.
--
-- Every command that can fail (WRONGTYPE: the queue, the waiters hash or the fence key
-- holding someone else's data) reads its key before the first write, as in acquire.lua, so
-- a failed hand-off leaves the lock with its holder and the line as it was. (A waiter
-- giving up leaves the line before it touches the waiters hash: it asked to leave.)
--
-- Idempotent: a retry after a lost reply finds the hold gone and changes nothing.
-- Returns the owner's remaining hold count (>= 0), or -1 if this hold was not held, or if
-- its own deadline had passed (it is dropped all the same).

local lock, queue, waiters, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local hold, owner = ARGV[1], ARGV[2]
local hold_field = '#' .. hold

-- A lone hold in string form: ours is released by deleting it; another's is not ours, and
-- it is not a hash to read.
local lone = redis.call('MGET', lock)[1]
if lone == hold then
  redis.call('DEL', lock)
  return 0
end
local found = lone and {} or redis.call('HMGET', lock, hold_field, owner, '~q', '~p')
if not found[1] then
  -- A waiter giving up leaves the line (a no-op for holds that never queued).
  if redis.call('LREM', queue, 0, hold) > 0 then
    redis.call('HDEL', waiters, hold)
  end
  return -1
end

-- What a hand-off reads, read before the first write (see the header): the last token, the
-- line's head and its entry. Only a hash whose '~q' flag is set can hand off.
local last, head, entry
if found[3] then
  last = redis.call('GET', fence)
  head = redis.call('LINDEX', queue, 0)
  if head then
    entry = redis.call('HGET', waiters, head)
  end
end

local now_us, now_ms
local function read_clock()
  local time = redis.call('TIME')
  now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
  now_ms = math.floor(now_us / 1000)
end

-- What this release answers: the owner's remaining count, or -1 below for a hold whose own
-- deadline had passed (its lease ended, even if a sibling kept the key alive).
local answer = 0

-- Siblings stay, but only the live ones (see acquire.lua's header): those whose deadline
-- passed leave too, the count follows, and the lock key lives until the latest live
-- deadline, no longer. If none is live the lock is free, as after its last hold. (A lone
-- hold's deadline is the key's own expiry, so its field alone says it is live.)
if tonumber(found[2] or '0') > 1 then
  redis.call('HDEL', lock, hold_field)
  read_clock()
  if (tonumber(found[1]) or 0) <= now_ms then
    answer = -1
  end
  local fields = redis.call('HGETALL', lock)
  local live, latest = 0, 0
  for i = 1, #fields, 2 do
    if string.sub(fields[i], 1, 1) == '#' then
      local deadline = tonumber(fields[i + 1]) or 0
      if deadline > now_ms then
        live = live + 1
        latest = math.max(latest, deadline)
      else
        redis.call('HDEL', lock, fields[i])
      end
    end
  end
  if live > 0 then
    redis.call('HSET', lock, owner, live)
    redis.call('PEXPIREAT', lock, string.format('%.0f', latest))
    return answer == 0 and live or answer
  end
end
redis.call('DEL', lock)

if head then
  if not now_us then
    read_clock()
  end
  redis.call('LPOP', queue)
  while head do
    redis.call('HDEL', waiters, head)
    local deadline, ttl, seq = string.match(entry or '0 0 0', '^(%d+) (%d+) (%d+)$')
    -- Expired entries belong to crashed waiters: skip them.
    if deadline and tonumber(deadline) > now_ms then
      local lease = math.min(tonumber(ttl), tonumber(deadline) - now_ms)
      local token = string.format('%.0f', math.max(tonumber(last or '0') + 1, now_us))
      redis.call('SET', fence, token, 'PXAT', string.format('%.0f', now_ms + lease + tonumber(ARGV[5])))
      -- One write for the new hold and the flags. '~q' stays set even if the line is now
      -- empty ("may be queued"): the next release then finds nobody with one LINDEX, where
      -- asking here would cost every hand-off an EXISTS.
      local owner_of, expiry = string.sub(head, 18), string.format('%.0f', now_ms + lease)
      if found[4] then
        redis.call('HSET', lock, owner_of, 1, '#' .. head, expiry, '~q', 1, '~p', 1)
      else
        redis.call('HSET', lock, owner_of, 1, '#' .. head, expiry, '~q', 1)
      end
      redis.call('PEXPIREAT', lock, expiry)
      redis.call('PUBLISH', ARGV[4] .. string.sub(head, 18, 49),
        string.format('%s %d %s %s', token, lease, seq, head))
      return answer
    end
    head = redis.call('LPOP', queue)
    entry = head and redis.call('HGET', waiters, head)
  end
end
redis.call('PEXPIRE', fence, ARGV[5])
if found[4] then
  redis.call('PUBLISH', ARGV[3], 'released')
end
return answer
