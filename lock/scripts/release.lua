-- release: drop one hold (unlock, abandoned acquire, waiter giving up) and, when the lock
-- becomes free, hand it directly to the first live fair waiter or announce it is free.
--
-- KEYS[1] lock hash (see acquire.lua)
-- KEYS[2] queue list of fair waiters' hold ids, head first
-- KEYS[3] waiters hash: hold id -> entry deadline in server milliseconds
-- KEYS[4] fence string (see acquire.lua)
-- ARGV[1] hold id (<16 hex>:<client 32 hex>:...), ARGV[2] owner (unused for a hold still
--         'handed': such a hold has no owner count)
-- ARGV[3] channel to publish 'released' on when the lock is free with nobody queued
-- ARGV[4] inbox channel prefix: a hand-off is published to prefix..<head's client id>
--         with the head's hold id as the message
-- ARGV[5] fence margin in ms: once the lock is free, the fence key lives this long (past a
--         hand-off's reservation, when there is one), so an idle name keeps no key longer
--
-- Idempotent: a retry after a lost reply finds the hold gone and changes nothing.
-- Returns the owner's remaining hold count (>= 0), or -1 if this hold was not held.

local lock, queue, waiters, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local margin = tonumber(ARGV[5])
local hold, owner = ARGV[1], ARGV[2]

-- A waiter giving up leaves the line (a no-op for holds that never queued).
if redis.call('LREM', queue, 0, hold) > 0 then
  redis.call('HDEL', waiters, hold)
end

-- A claimed hold counts for its owner; a hand-off never claimed ('handed') counts for
-- nobody and is the lock's only field, so giving it up frees the lock.
local state = redis.call('HGET', lock, '#' .. hold)
if not state then
  return -1
end
redis.call('HDEL', lock, '#' .. hold)
if state == '1' then
  local left = redis.call('HINCRBY', lock, owner, -1)
  if left > 0 then
    return left
  end
end
redis.call('DEL', lock)

if redis.call('EXISTS', queue) == 1 then
  local time = redis.call('TIME')
  local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local head = redis.call('LPOP', queue)
  while head do
    local deadline = tonumber(redis.call('HGET', waiters, head) or '0')
    redis.call('HDEL', waiters, head)
    -- Expired entries belong to crashed waiters: skip them.
    if deadline > now_ms then
      -- The lock is reserved for the head from now on, for the rest of its entry's
      -- lifetime; it claims the hold (new epoch: new token, its own TTL) on wake-up or at
      -- its next refresh, whichever is first, so a waiter that died since its last refresh
      -- blocks nobody past its deadline. Until the claim nobody holds the lock: no owner
      -- count, so the head's owner cannot re-enter an epoch it does not hold.
      redis.call('HSET', lock, '#' .. head, 'handed')
      redis.call('PEXPIRE', lock, deadline - now_ms)
      redis.call('PEXPIRE', fence, deadline - now_ms + margin)
      redis.call('PUBLISH', ARGV[4] .. string.sub(head, 18, 49), head)
      return 0
    end
    head = redis.call('LPOP', queue)
  end
end
redis.call('PEXPIRE', fence, margin)
redis.call('PUBLISH', ARGV[3], 'released')
return 0
