-- extend: set the lease of a lock the caller holds.
-- KEYS[1] lock hash; ARGV[1] token; ARGV[2] lease ms.
-- Returns 1 if extended, 0 if the caller does not hold the lock.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
