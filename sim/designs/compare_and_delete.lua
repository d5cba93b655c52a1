-- set-nx-px-cad's release: delete the lock key only while it still holds this client's
-- token, so a release never frees a lock another client took after this one's expired.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the releasing client's token
--
-- Returns 1 if the key was this client's and is deleted, 0 otherwise.
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
