-- requeue.lua appends an accepted order to the voucher's stream again, for
-- reconciliation, if the user is still recorded with that order.
--
-- KEYS[1] buyers hash, KEYS[2] orders stream
-- ARGV[1] user id, ARGV[2] order id
--
-- Returns 1 when it appended the order, 0 when the buyer changed.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call('XADD', KEYS[2], '*', 'o', ARGV[2], 'u', ARGV[1])
return 1
