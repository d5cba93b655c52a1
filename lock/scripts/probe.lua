-- probe: read-only check used after an ambiguous acquire (connection lost before the reply):
-- does this hold own the lock, with which token, for how long?
--
-- KEYS[1] lock hash (see acquire.lua), KEYS[2] fence string
-- ARGV[1] hold id
--
-- Returns {1, token, pttl} if the hold is live (claimed), {0, '', pttl} otherwise.
-- Writes nothing.

local pttl = redis.call('PTTL', KEYS[1])
if redis.call('HGET', KEYS[1], '#' .. ARGV[1]) == '1' then
  return {1, redis.call('GET', KEYS[2]) or '', pttl}
end
return {0, '', pttl}
