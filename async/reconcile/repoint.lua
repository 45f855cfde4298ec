-- repoint.lua records another value for a buyer, if the buyer is still
-- recorded with the expected one.
--
-- KEYS[1] buyers hash
-- ARGV[1] user id, ARGV[2] expected record, ARGV[3] new record
--
-- Returns 1 when it changed the buyer, 0 otherwise.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
