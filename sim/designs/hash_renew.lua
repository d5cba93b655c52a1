-- hash-watchdog's renewal: restart the lease while the hash still counts this owner.
--
-- KEYS[1]  the lock hash
-- ARGV[1]  lease, ms
-- ARGV[2]  the owner
--
-- Returns 1 when renewed, 0 when the owner no longer holds the lock.
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 1
end
return 0
