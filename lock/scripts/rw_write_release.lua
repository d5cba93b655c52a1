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
-- Returns the owner's remaining write hold count (>= 0), or -1 if this hold was not held.

local write, intents = KEYS[1], KEYS[2]
local hold, owner = ARGV[1], ARGV[2]

-- A waiting writer giving up withdraws its intent (a no-op for other holds).
redis.call('ZREM', intents, hold)

if redis.call('HDEL', write, '#' .. hold) == 0 then
  return -1
end
local left = redis.call('HINCRBY', write, owner, -1)
if left > 0 then
  return left
end
redis.call('DEL', write)
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call('PUBLISH', ARGV[3], 'released')
return 0
