-- hash-watchdog's release: one hold of this owner ends; the last one deletes the hash and
-- publishes on the lock's channel, which waiters subscribe to.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's channel
-- ARGV[1]  lease, ms (the rest of a reentrant owner's holds keep a fresh lease)
-- ARGV[2]  the owner
--
-- Returns nil when the owner held nothing, 0 while it still holds, 1 when freed.
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], 'unlocked')
return 1
