-- rw_write_release: drop one write hold (unlock, abandoned acquire, writer giving up) and
-- announce when the write lock becomes free.
--
-- KEYS[1] write hash (see rw_write_acquire.lua)
-- KEYS[2] intents zset: waiting writer's hold id -> intent deadline in server milliseconds
-- KEYS[3] fence string: the last write token (see rw_write_acquire.lua)
-- ARGV[1] hold id, ARGV[2] owner
-- ARGV[3] channel to publish 'released' on when the write lock becomes free
-- ARGV[4] fence margin in ms: how long the fence key lives once the write lock is free
--
-- Idempotent: a retry after a lost reply finds the hold gone and changes nothing.
-- Returns the owner's remaining write hold count (>= 0), or -1 if this hold was not held,
-- or if its own deadline had passed (it is dropped all the same).

local write, intents = KEYS[1], KEYS[2]
local hold, owner = ARGV[1], ARGV[2]

-- A waiting writer giving up withdraws its intent (a no-op for other holds).
redis.call('ZREM', intents, hold)

local mine = redis.call('HGET', write, '#' .. hold)
if not mine then
  return -1
end
redis.call('HDEL', write, '#' .. hold)
-- The owner's other write holds stay while live; those whose deadline passed leave too,
-- and the hash lives until the latest live deadline (see acquire.lua's header). A hold
-- whose own deadline had passed answers -1, as in release.lua.
local answer = 0
if redis.call('HINCRBY', write, owner, -1) > 0 then
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  if (tonumber(mine) or 0) <= now then
    answer = -1
  end
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
    redis.call('PEXPIRE', write, latest - now)
    return answer == 0 and live or answer
  end
end
redis.call('DEL', write)
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call('PUBLISH', ARGV[3], 'released')
return answer
