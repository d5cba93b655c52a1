-- rw-hash's release: one hold of this owner ends; its field goes at zero, and the hash
-- goes with the last owner's field. The other owners' holds keep the lease the last grant
-- set.
--
-- KEYS[1]  the lock hash
-- ARGV[1]  the owner
--
-- Returns nil when the owner held nothing, 0 while holds remain, 1 when the hash is
-- deleted.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then
  return 0
end
redis.call('hdel', KEYS[1], ARGV[1])
if redis.call('hlen', KEYS[1]) > 1 then
  return 0
end
redis.call('del', KEYS[1])
return 1
