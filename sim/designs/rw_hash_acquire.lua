-- rw-hash's acquire: a read-write lock in one hash (one key, so one cluster slot), a
-- 'mode' field ('read' or 'write') and one hold-count field per owner, the whole hash
-- expiring with the lease. A read is granted when the hash is absent, in read mode, or
-- already this owner's (re-entry, a writer reading included); a write when the hash is
-- absent or this owner's in write mode.
--
-- KEYS[1]  the lock hash
-- ARGV[1]  lease, ms
-- ARGV[2]  the owner
-- ARGV[3]  'read' or 'write'
--
-- Returns 1 when granted (the owner's count is one higher and the whole hash's lease
-- restarts), 0 when busy.
local mode = redis.call('hget', KEYS[1], 'mode')
local mine = redis.call('hexists', KEYS[1], ARGV[2]) == 1
local granted
if not mode then
  redis.call('hset', KEYS[1], 'mode', ARGV[3])
  granted = true
elseif ARGV[3] == 'read' then
  granted = mode == 'read' or mine
else
  granted = mode == 'write' and mine
end
if not granted then
  return 0
end
redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
return 1
