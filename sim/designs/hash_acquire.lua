-- hash-watchdog's acquire: a reentrant lock in one hash, owner -> hold count, the whole
-- hash expiring with the lease. Granted when the hash is absent or already this owner's.
--
-- KEYS[1]  the lock hash
-- ARGV[1]  lease, ms
-- ARGV[2]  the owner
--
-- Returns nil when granted (the owner's count is one higher and the lease restarts),
-- otherwise the hash's remaining time to live in ms, as a hint of when to try again.
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
