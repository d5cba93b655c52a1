-- acquire: take the lock, re-enter it, or (fair mode) wait in line.
--
-- KEYS[1] lock key, in one of two forms:
--         a string: the hold id of a lone hold granted on the fast path, whose lease
--           deadline is the key's own expiry (the lone hold form: see below);
--         a hash: <owner> = count of the owner's holds; '#'..<hold id> = that hold's
--           lease deadline in server ms (each hold is a lease of its own: see below);
--           '~q' = 1 while fair waiters may be queued and '~p' = 1 while some waiter
--           listens on the released channel (flags that spare the release script a look
--           at the queue or a PUBLISH nobody hears; owners and '#' fields never start
--           with '~')
-- KEYS[2] fence string: the last fencing token issued for this name
-- KEYS[3] queue list: hold ids of fair waiters, head first
-- KEYS[4] waiters hash: hold id -> '<entry deadline in server ms> <lease TTL ms> <seq>'
-- ARGV[1] hold id (<16 hex>:<owner>), unique per acquire call and reused by its retries
-- ARGV[2] owner
-- ARGV[3] lease TTL in ms
-- ARGV[4] queue entry timeout in ms; '0' = never queue (Spin, PubSub, try_lock)
-- ARGV[5] fence margin in ms: how long the fence key outlives every lease (see fencing.rs)
-- ARGV[6] attempt sequence number of this acquire call (a fair waiter's refreshes count up);
--         the release script's hand-off names the last one it saw (see release.lua)
-- ARGV[7] '1' if the caller waits for the released message (PubSub), else '0'
--
-- Returns {1, token} when the hold owns the lock: fresh (new token), re-entered (the
--         epoch's token), or already ours (a retry whose reply was lost, or a fair hand-off
--         the release script granted: idempotent, no second count; the lease is extended);
--         {0, ms}    otherwise: the holder's remaining lease in ms, or, when the lock is
--         free but a live queued waiter goes first, the head's remaining entry time in ms
--         (> 0): by then the head has taken the lock or its entry is gone, so a waiter
--         behind a crashed head asks again when it expires, not a refresh later;
--         {0, ms, 1} the same, to a caller that does not queue (ARGV[4] = '0') finding
--         fair waiters: the `~q` flag, or a free lock whose queue head goes first.
--
-- The lock key's TTL only ever grows here: every hold of the owner trusts its own lease,
-- so a re-entry with a shorter TTL must not cut the lease of a longer one.
--
-- Each hold's field carries its own deadline (now + TTL at its grant, retry or renewal),
-- and a hold is live only until then, even while a sibling keeps the lock key alive. The
-- owner's epoch (its token, its way past the queue) lasts while one of its holds is live:
-- before re-entering, the script drops the owner's holds whose deadline passed. Without
-- that, a sibling whose release was lost on the way would stay in the hash as long as the
-- owner kept acquiring, and every later acquire of the owner would re-enter the old epoch
-- (its token, ahead of the queue) after every hold the owner believed in had ended. A
-- client never trusts a hold past its own deadline (its validity counts from a request
-- sent before the deadline was set, for at most the TTL), so dropping it takes nothing
-- from anyone who still believes in it.
--
-- The lone hold form. A free lock with nobody queued is granted as the string
-- `SET lock <hold id> PXAT now + ttl`: one write instead of a hash and its PEXPIREAT, and a release
-- of one GET (by MGET, which answers nil rather than WRONGTYPE for a hash) and a DEL. The
-- string stands for exactly the hash {<owner> = 1, '#'..<hold id> = its expiry}: the hold
-- id names its owner (<16 hex>:<owner>), and its deadline is the key's expiry, which
-- Redis enforces as the hash path enforces a '#' field's deadline. Every script reads the
-- string as that hash: renew and probe answer for it directly, release deletes it, a
-- plain attempt of another owner (no queue, no listener) is refused with what is left of
-- its lease, and any other acquire first rewrites it into that hash (its deadline the
-- key's own expiry, read with PEXPIRETIME, and that expiry kept) before going on as for a
-- hash. So each script does on the string form what it does on the hash it stands for,
-- and a string never carries a '~' flag: setting one (a fair waiter, a listener) or adding
-- a second hold (re-entry) goes through that rewrite first, which is why the release of a
-- string needs no look at the queue nor a PUBLISH. A string under the lock key that is not
-- a hold id with an expiry is someone else's data: WRONGTYPE.
--
-- Every command that can fail (WRONGTYPE) reads its key before the first write to the lock
-- hash, so a failed call never leaves a lock behind: the queue keys are touched (leaving
-- the line) and the fence key read before the hash is written (the rewrite of a lone hold
-- changes its form only).
--
-- Every expiry the script sets is absolute (PEXPIREAT, SET PXAT), computed from its one
-- reading of TIME, never a TTL read or set relative to the clock while it runs: Redis before
-- 7.2 reads the live clock for each PTTL, PEXPIRE and SET PX in a script, and that clock
-- moves on while the script runs, so a relative TTL would keep the key past the deadline
-- the hash records by the script's own run time.
--
-- Cost: a free lock with nobody queued takes EXISTS, TIME, SET (fence) and SET (lock). A
-- fair waiter joining the line behind a holder takes TIME, EXISTS, MGET, HMGET (its hold,
-- its owner and the flags, so a flag already set is not written again), EXISTS, LPOS,
-- RPUSH, HSET, PEXPIRETIME and PEXPIREAT per queue key and the holder's PTTL.

local lock, fence, queue, waiters = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local hold, owner = ARGV[1], ARGV[2]
local ttl, entry_timeout, margin = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local hold_field = '#' .. hold

local time = redis.call('TIME')
local now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
local now_ms = math.floor(now_us / 1000)
local deadline = string.format('%.0f', now_ms + ttl)

-- A new holding epoch: max(last + 1, server µs), so tokens grow even after the fence key
-- expired, and the fence key lives the lease + margin. One SET ... GET in the usual case;
-- a second SET only when the clock has not passed the last token. '%.0f' keeps all digits
-- (tostring would switch to exponent notation).
local function issue_token()
  local text = string.format('%.0f', now_us)
  local fence_at = string.format('%.0f', now_ms + ttl + margin)
  local last = tonumber(redis.call('SET', fence, text, 'PXAT', fence_at, 'GET') or '0')
  if last >= now_us then
    text = string.format('%.0f', last + 1)
    redis.call('SET', fence, text, 'PXAT', fence_at)
  end
  return text
end

-- A new epoch for this hold alone (token issued first: see the header on failures).
local function new_epoch()
  local token = issue_token()
  redis.call('HSET', lock, owner, 1, hold_field, deadline)
  redis.call('PEXPIREAT', lock, deadline)
  return token
end

-- Fast path: a free lock with no queue, granted in the lone hold form (see the header).
if redis.call('EXISTS', lock, queue) == 0 then
  local token = issue_token()
  redis.call('SET', lock, hold, 'PXAT', deadline)
  return {1, token}
end

-- A lone hold in string form becomes the hash it stands for, before anything reads the
-- lock as a hash (see the header).
local lone = redis.call('MGET', lock)[1]
if lone then
  local expires = redis.call('PEXPIRETIME', lock)
  if expires < 0 or not string.match(lone, '^' .. string.rep('%x', 16) .. ':.') then
    return redis.error_reply('WRONGTYPE the lock key holds a string that is not a lease')
  end
  -- A plain attempt (Spin, try_lock) of another owner records nothing on the hash, so
  -- the string stays: the answer is the hash's, the holder's lease.
  if lone ~= hold and string.sub(lone, 18) ~= owner and entry_timeout == 0
      and ARGV[7] ~= '1' then
    return {0, math.max(expires - now_ms, 0)}
  end
  -- Redis keeps a key through its expiry's millisecond (it drops it once now > expiry),
  -- and the scripts keep a field while its deadline > now: hence the + 1. The key keeps
  -- its absolute expiry: a TTL read and set again would move it on by the time the script
  -- took, on a Redis whose clock moves during a script (see the header).
  redis.call('DEL', lock)
  redis.call('HSET', lock, string.sub(lone, 18), 1, '#' .. lone,
    string.format('%.0f', expires + 1))
  redis.call('PEXPIREAT', lock, expires)
end

local function leave_queue()
  if entry_timeout > 0 then
    redis.call('LREM', queue, 0, hold)
    redis.call('HDEL', waiters, hold)
  end
end

-- Another hold joins a held epoch (or a retry finds its hold): the hold's deadline moves to
-- now + TTL, the lock's TTL to at least the granted lease, never shortening it, and the
-- fence key lives the margin past the lock, so a token is not forgotten while anybody
-- could still act on it, nor kept much longer.
local function granted(token)
  redis.call('HSET', lock, hold_field, deadline)
  local lock_at = redis.call('PEXPIRETIME', lock)
  if lock_at < now_ms + ttl then
    redis.call('PEXPIREAT', lock, deadline)
    lock_at = now_ms + ttl
  end
  if redis.call('PEXPIRETIME', fence) < lock_at + margin then
    redis.call('PEXPIREAT', fence, string.format('%.0f', lock_at + margin))
  end
  return {1, token}
end

-- The token of the running epoch (re-issued if the fence key was lost with a restart).
local function current_token()
  return redis.call('GET', fence) or issue_token()
end

local found = redis.call('HMGET', lock, hold_field, owner, '~q', '~p')

-- The owner's holds whose deadline passed leave first (see the header), its count follows,
-- and a hash left without a live hold goes: the lock is free.
if found[2] then
  local fields = redis.call('HGETALL', lock)
  local live = 0
  for i = 1, #fields, 2 do
    if string.sub(fields[i], 1, 1) == '#' then
      if (tonumber(fields[i + 1]) or 0) > now_ms then
        live = live + 1
      else
        redis.call('HDEL', lock, fields[i])
        if fields[i] == hold_field then
          found[1] = false
        end
      end
    end
  end
  if live == 0 then
    redis.call('DEL', lock)
    found[2] = false
  elseif live ~= tonumber(found[2]) then
    redis.call('HSET', lock, owner, live)
  end
end

-- Already ours: a retry whose first reply was lost, or a fair hand-off the release script
-- granted (the waiter asks again when its message was lost or its own bound on the lease
-- was too short to trust).
if found[1] then
  leave_queue()
  return granted(current_token())
end

-- Re-entry by the owner: one more hold in the epoch the owner holds, bypassing the queue.
if found[2] then
  leave_queue()
  local token = current_token()
  redis.call('HINCRBY', lock, owner, 1)
  return granted(token)
end

-- The entry deadline of a queued hold (0 when it has none).
local function deadline_of(queued)
  return tonumber(string.match(redis.call('HGET', waiters, queued) or '0', '^%d+'))
end

-- A free lock: drop queue heads whose entry deadline passed (a crashed waiter stalls nobody
-- for longer), then the live head, or anyone if nobody is queued, takes it. While the lock
-- is held the head waits anyway, and the release skips expired entries as it hands off.
local held = redis.call('EXISTS', lock) == 1
-- The live head's entry deadline, when the lock is free and that head goes first.
local head_deadline
if not held then
  local head = redis.call('LINDEX', queue, 0)
  head_deadline = head and deadline_of(head)
  while head and head_deadline <= now_ms do
    redis.call('LPOP', queue)
    redis.call('HDEL', waiters, head)
    head = redis.call('LINDEX', queue, 0)
    head_deadline = head and deadline_of(head)
  end
  if (not head) or head == hold then
    leave_queue()
    local token = new_epoch()
    if redis.call('EXISTS', queue) == 1 then
      redis.call('HSET', lock, '~q', 1)
    end
    return {1, token}
  end
end

if entry_timeout > 0 then
  local entry = string.format('%.0f %d %s', now_ms + entry_timeout, ttl, ARGV[6])
  -- The list says who is in line, not the entries' hash: the two keys can part (an
  -- eviction takes one of them), and a refresh must then put the hold back in line.
  if not redis.call('LPOS', queue, hold) then
    redis.call('RPUSH', queue, hold)
  end
  redis.call('HSET', waiters, hold, entry)
  -- The queue keys live as long as their longest entry, never shorter.
  for _, key in ipairs({queue, waiters}) do
    if redis.call('PEXPIRETIME', key) < now_ms + entry_timeout then
      redis.call('PEXPIREAT', key, string.format('%.0f', now_ms + entry_timeout))
    end
  end
  if held and not found[3] then
    redis.call('HSET', lock, '~q', 1)
  end
end
if held and ARGV[7] == '1' and not found[4] then
  redis.call('HSET', lock, '~p', 1)
end
local busy
if held then
  busy = {0, redis.call('PTTL', lock)}
else
  busy = {0, head_deadline - now_ms}
end
-- A caller that does not queue but finds fair waiters (a mixed-strategy deployment, in
-- which the queue can starve it) is told so, for the client to warn.
if entry_timeout == 0 and (found[3] or not held) then
  busy[3] = 1
end
return busy
