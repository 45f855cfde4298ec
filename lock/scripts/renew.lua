-- renew: before a local handoff, the holder of a turn makes sure the turn
-- still owns the lock, sets its lease, and reserves ARGV[3] more fencing
-- tokens if it is not 0 (see reserve in common.lua; this script does not
-- include it, to stay small).
-- KEYS[1] lock hash; KEYS[2] fence key.
-- ARGV[1] the turn's token; ARGV[2] lease ms; ARGV[3] block; ARGV[4] fence
-- retention ms.
-- Returns -1 if the turn does not hold the lock, 0 if it reserved nothing,
-- else the first fence of the new block.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return -1 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local n = tonumber(ARGV[3])
if n == 0 then return 0 end
local last = redis.call('INCRBY', KEYS[2], n)
if last <= 1024 then
  local t = redis.call('TIME')
  last = tonumber(t[1]) * 1000000 + tonumber(t[2]) + n - 1
  redis.call('SET', KEYS[2], string.format('%d', last), 'PX', ARGV[4])
end
return last - n + 1
