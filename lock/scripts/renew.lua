-- renew: extend a live hold's lease (watchdog, Guard::extend). Never creates a lock, so a
-- late renewal after a release or expiry cannot resurrect it.
--
-- KEYS[1] lock key: a lone hold's string or the lock hash (see acquire.lua; the write
--         lock's is always a hash), KEYS[2] fence string
-- ARGV[1] hold id, ARGV[2] lease TTL in ms, ARGV[3] fence margin in ms (see acquire.lua)
--
-- Returns 1 if the hold is live and its lease now runs at least ARGV[2] ms from now, 0 if
-- it is gone or its own deadline has passed (a sibling of the owner may keep the lock key
-- alive, but not this hold: see acquire.lua's header).

local ttl = tonumber(ARGV[2])
local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

-- The lock key lives at least the TTL from now, never shorter (another hold of the same
-- owner may trust a longer lease), and the fence key the margin past it. Absolute expiries
-- from the one reading of TIME (acquire.lua's header has why).
local function extend()
  local lock_at = redis.call('PEXPIRETIME', KEYS[1])
  if lock_at < now_ms + ttl then
    lock_at = now_ms + ttl
    redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', lock_at))
  end
  local fence_at = lock_at + tonumber(ARGV[3])
  if redis.call('PEXPIRETIME', KEYS[2]) < fence_at then
    redis.call('PEXPIREAT', KEYS[2], string.format('%.0f', fence_at))
  end
  return 1
end

-- A lone hold in string form is live while its key is: its deadline is the key's expiry.
local lone = redis.call('MGET', KEYS[1])[1]
if lone then
  return lone == ARGV[1] and extend() or 0
end

local field = '#' .. ARGV[1]
local deadline = tonumber(redis.call('HGET', KEYS[1], field) or '0') or 0
if deadline <= now_ms then
  return 0
end
if deadline < now_ms + ttl then
  redis.call('HSET', KEYS[1], field, string.format('%.0f', now_ms + ttl))
end
return extend()
