-- zset-queue's acquire: a FIFO of waiters in a sorted set scored by each waiter's own clock
-- when it joined; the head of the queue takes the lock key and leaves the queue.
--
-- KEYS[1]  the lock key (string: the holder's token)
-- KEYS[2]  the queue (sorted set: waiter token, scored by its client's clock at joining)
-- ARGV[1]  lease, ms
-- ARGV[2]  the waiter's token
-- ARGV[3]  the caller's own clock, ms: its entry's score, and the time staleness is
--          judged by
-- ARGV[4]  the entry timeout, ms: an entry older than this on the caller's clock is
--          dropped; the queue key lives this long after the last call
--
-- Returns nil when granted (the lock key holds the token for the lease, the waiter left
-- the queue); otherwise the lock key's remaining time to live in ms (negative when the
-- lock is free and another waiter heads the queue), as a hint of when to try again.
local now = tonumber(ARGV[3])
redis.call('zremrangebyscore', KEYS[2], '-inf', '(' .. (now - tonumber(ARGV[4])))
redis.call('zadd', KEYS[2], 'NX', now, ARGV[2])
redis.call('pexpire', KEYS[2], ARGV[4])
local head = redis.call('zrange', KEYS[2], 0, 0)[1]
if head == ARGV[2] and redis.call('exists', KEYS[1]) == 0 then
  redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[1])
  redis.call('zrem', KEYS[2], ARGV[2])
  return nil
end
return redis.call('pttl', KEYS[1])
