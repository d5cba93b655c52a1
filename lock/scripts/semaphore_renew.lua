-- semaphore_renew: extend a live permit's lease (watchdog, extend). Never creates a permit,
-- so a late renewal after a release or expiry cannot resurrect it.
--
-- KEYS[1] permits zset: hold id -> lease deadline in server milliseconds
-- KEYS[2] size string, kept alive as long as the zset (see semaphore_acquire.lua)
-- ARGV[1] hold id, ARGV[2] lease TTL in ms
--
-- Returns 1 if the permit is live and its lease now runs at least ARGV[2] ms from now, 0 if
-- gone.
--
-- A deadline only ever moves later here, as a mutex hold's does (renew.lua): a permit a
-- release handed over carries its waiter's entry deadline until claimed, which may lie
-- beyond now + TTL, and a waiter whose claim went unanswered learns that deadline from
-- semaphore_probe and trusts it. Cutting it back to now + TTL would end the permit on the
-- server while its holder still believes in it.

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
if (not deadline) or tonumber(deadline) <= now then
  return 0
end
local renewed = now + tonumber(ARGV[2])
if tonumber(deadline) < renewed then
  redis.call('ZADD', KEYS[1], string.format('%.0f', renewed), ARGV[1])
end
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local live = tonumber(last[2])
redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', live))
-- Only ever later: the queue's keys may outlive the zset, and the size lives as long.
local size = KEYS[2]
if redis.call('PEXPIRETIME', size) < live then
  redis.call('PEXPIREAT', size, string.format('%.0f', live))
end
return 1
