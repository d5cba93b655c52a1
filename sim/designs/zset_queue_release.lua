-- zset-queue's release: compare-and-delete the lock key, and tell the waiters on the
-- lock's channel that it is free.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's channel
-- ARGV[1]  the releasing client's token
--
-- Returns 1 if the key was this client's and is deleted (and the message published), 0
-- otherwise.
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], 'unlocked')
  return 1
end
return 0
