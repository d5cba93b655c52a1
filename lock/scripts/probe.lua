-- probe: read-only check used after an ambiguous acquire (connection lost before the reply):
-- does this hold own the lock, with which token, for how long?
--
-- KEYS[1] lock key: a lone hold's string or the lock hash (see acquire.lua; the write
--         lock's is always a hash), KEYS[2] fence string
-- ARGV[1] hold id
--
-- Returns {1, token, ms left} if the hold is live: ms left is the hold's own lease (its
-- deadline less now, as acquire.lua's header has it), never more than the lock key's TTL;
-- {0, '', pttl} otherwise (pttl: the lock key's). Writes nothing.

local pttl = redis.call('PTTL', KEYS[1])
-- A lone hold in string form is live while its key is: its deadline is the key's expiry.
local lone = redis.call('MGET', KEYS[1])[1]
if lone then
  if lone == ARGV[1] then
    return {1, redis.call('GET', KEYS[2]) or '', pttl}
  end
  return {0, '', pttl}
end
local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local deadline = tonumber(redis.call('HGET', KEYS[1], '#' .. ARGV[1]) or '0') or 0
if deadline > now_ms then
  return {1, redis.call('GET', KEYS[2]) or '', math.min(deadline - now_ms, pttl)}
end
return {0, '', pttl}
