-- rw-two-keys' release: a writer compare-and-deletes the write key; a reader takes its
-- count down in the read key, removing its field at zero and the key with its last field.
--
-- KEYS[1]  the write key
-- KEYS[2]  the read key
-- ARGV[1]  the token of the hold released
-- ARGV[2]  'read' or 'write'
--
-- Returns 1 when the hold was there and is released, 0 otherwise (a reader whose field
-- is gone writes nothing: a count created here would have no TTL).
if ARGV[2] == 'write' then
  if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
  end
  return 0
end
if redis.call('hexists', KEYS[2], ARGV[1]) == 0 then
  return 0
end
if redis.call('hincrby', KEYS[2], ARGV[1], -1) <= 0 then
  redis.call('hdel', KEYS[2], ARGV[1])
  if redis.call('hlen', KEYS[2]) == 0 then
    redis.call('del', KEYS[2])
  end
end
return 1
