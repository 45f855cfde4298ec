-- lookup.lua tells whether an accepted order not in MySQL is still on its
-- way (the buyer is recorded with it and it was not dead-lettered).
--
-- KEYS[1] buyers hash, KEYS[2] failed hash
-- ARGV[1] user id, ARGV[2] order id
--
-- Returns 1 when the order is pending, 0 when it failed.
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] and redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then
  return 1
end
return 0
