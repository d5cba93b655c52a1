-- acquire: take the lock, re-enter it, claim a hand-off, or (fair mode) wait in line.
--
-- KEYS[1] lock hash: <owner> = count of the owner's claimed holds; '#'..<hold id> = 1 per
--         claimed hold, or 'handed' for a fair hand-off its hold has not claimed yet (a
--         handed lock has that one field and no owner count: nobody holds it until the
--         claim, so the owner's other holds cannot re-enter it)
-- KEYS[2] fence string: the last fencing token issued for this name
-- KEYS[3] queue list: hold ids of fair waiters, head first
-- KEYS[4] waiters hash: hold id -> entry deadline in server milliseconds
-- ARGV[1] hold id (<16 hex>:<owner>), unique per acquire call and reused by its retries
-- ARGV[2] owner
-- ARGV[3] lease TTL in ms
-- ARGV[4] queue entry timeout in ms; '0' = never queue (Spin, PubSub, try_lock)
-- ARGV[5] fence margin in ms: how long the fence key outlives the lock (see fencing.rs)
--
-- Returns {1, token} when the hold owns the lock: fresh (new token), re-entered (the
--         epoch's token), or already applied / handed over (idempotent: no second count);
--         {0, pttl}  otherwise: the holder's remaining lease in ms, or -2 when the lock is
--         free but a live queued waiter goes first.
--
-- The lock key's TTL only ever grows here: every hold of the owner trusts its own lease,
-- so a re-entry with a shorter TTL must not cut the lease of a longer one.
--
-- Every command that can fail (WRONGTYPE) reads its key before the first write to the lock
-- hash, so a failed call never leaves a lock behind: the queue keys are touched (leaving
-- the line) and the fence key read before the hash is written.

local lock, fence, queue, waiters = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local hold, owner = ARGV[1], ARGV[2]
local ttl, entry_timeout, margin = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local hold_field = '#' .. hold

local time = redis.call('TIME')
local now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
local now_ms = math.floor(now_us / 1000)

-- A new holding epoch: max(last + 1, server µs), so tokens grow even after the fence key
-- expired. '%.0f' keeps all digits (tostring would switch to exponent notation).
local function issue_token()
  local last = tonumber(redis.call('GET', fence) or '0')
  local token = now_us
  if token <= last then
    token = last + 1
  end
  local text = string.format('%.0f', token)
  redis.call('SET', fence, text, 'PX', ttl + margin)
  return text
end

local function leave_queue()
  if entry_timeout > 0 then
    redis.call('LREM', queue, 0, hold)
    redis.call('HDEL', waiters, hold)
  end
end

-- Another hold joins a held epoch: extends the lock's TTL to at least the granted lease,
-- never shortening it, and keeps the fence key alive the margin past the lock, so a token
-- is not forgotten while anybody could still act on it, nor kept much longer.
local function granted(token)
  local lock_left = redis.call('PTTL', lock)
  if lock_left < ttl then
    redis.call('PEXPIRE', lock, ttl)
    lock_left = ttl
  end
  if redis.call('PTTL', fence) < lock_left + margin then
    redis.call('PEXPIRE', fence, lock_left + margin)
  end
  return {1, token}
end

-- A new epoch: the lock hash was just written for this hold alone, and issue_token just
-- set the fence key to live the lease + margin.
local function granted_new_epoch(token)
  redis.call('PEXPIRE', lock, ttl)
  return {1, token}
end

-- The token of the running epoch (re-issued if the fence key was lost with a restart).
local function current_token()
  return redis.call('GET', fence) or issue_token()
end

-- Already ours: a retry whose first reply was lost, or a fair hand-off to claim. A claim
-- starts a new epoch with a new token.
local mine = redis.call('HGET', lock, hold_field)
if mine == 'handed' then
  leave_queue()
  local token = issue_token()
  redis.call('HSET', lock, hold_field, 1)
  redis.call('HINCRBY', lock, owner, 1)
  -- The reservation (up to an entry timeout) was nobody's lease: the claimed lock lives
  -- this hold's TTL, so a holder that dies blocks the line one TTL, not one entry timeout.
  return granted_new_epoch(token)
elseif mine then
  leave_queue()
  return granted(current_token())
end

-- Re-entry by the owner: one more hold in the epoch the owner holds (claimed holds only;
-- a pending hand-off has no owner count), bypassing the queue.
if redis.call('HEXISTS', lock, owner) == 1 then
  leave_queue()
  local token = current_token()
  redis.call('HSET', lock, hold_field, 1)
  redis.call('HINCRBY', lock, owner, 1)
  return granted(token)
end

-- Drop queue heads whose entry deadline passed: a crashed waiter stalls nobody for longer.
local head = redis.call('LINDEX', queue, 0)
while head and tonumber(redis.call('HGET', waiters, head) or '0') <= now_ms do
  redis.call('LPOP', queue)
  redis.call('HDEL', waiters, head)
  head = redis.call('LINDEX', queue, 0)
end

if redis.call('EXISTS', lock) == 0 then
  if (not head) or head == hold then
    leave_queue()
    local token = issue_token()
    redis.call('HSET', lock, owner, 1, hold_field, 1)
    return granted_new_epoch(token)
  end
end

if entry_timeout > 0 then
  local deadline = string.format('%.0f', now_ms + entry_timeout)
  if redis.call('HEXISTS', waiters, hold) == 0 then
    redis.call('RPUSH', queue, hold)
  end
  redis.call('HSET', waiters, hold, deadline)
  -- The queue keys live as long as their longest entry, never shorter.
  for _, key in ipairs({queue, waiters}) do
    if redis.call('PTTL', key) < entry_timeout then
      redis.call('PEXPIRE', key, entry_timeout)
    end
  end
end
return {0, redis.call('PTTL', lock)}
