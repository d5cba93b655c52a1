-- rw-two-keys' acquire: a read-write lock of two keys on one node, a write key (the
-- writer's token) and a read key (reader token -> hold count), both checked here.
-- A reader is granted while no write key exists, and restarts the read key's lease (every
-- reader's, as they share the key); a writer while neither key exists.
--
-- KEYS[1]  the write key
-- KEYS[2]  the read key
-- ARGV[1]  lease, ms
-- ARGV[2]  the token of this hold
-- ARGV[3]  'read' or 'write'
--
-- Returns 1 when granted, 0 when busy.
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
if ARGV[3] == 'read' then
  redis.call('hincrby', KEYS[2], ARGV[2], 1)
  redis.call('pexpire', KEYS[2], ARGV[1])
  return 1
end
if redis.call('exists', KEYS[2]) == 1 then
  return 0
end
redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[1])
return 1
