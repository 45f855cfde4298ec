-- requeue.lua appends an accepted order to the voucher's stream again, for
-- reconciliation, if the user's latest order is still that one.
--
-- The order counts in the backlog again (meta's queued), as when the gate
-- accepted it: it left MySQL after its entry was acknowledged. When its
-- entry was lost from the stream instead, the gate's count of it was never
-- taken out, and the recount that follows the requeues (recount.lua)
-- corrects the double count.
--
-- KEYS[1] buyers hash, KEYS[2] orders stream, KEYS[3] meta hash
-- ARGV[1] user id, ARGV[2] order id, ARGV[3] its quantity
--
-- Returns 1 when it appended the order, 0 when the buyer changed.
local prev = redis.call('HGET', KEYS[1], ARGV[1])
if not prev then
  return 0
end
local latest = prev
local c = string.find(prev, ':', 1, true)
if c then
  latest = string.sub(prev, c + 1)
end
if latest ~= ARGV[2] then
  return 0
end
if ARGV[3] == '1' then
  redis.call('XADD', KEYS[2], '*', 'o', ARGV[2], 'u', ARGV[1])
else
  redis.call('XADD', KEYS[2], '*', 'o', ARGV[2], 'u', ARGV[1], 'q', ARGV[3])
end
if redis.call('HEXISTS', KEYS[3], 'queued') == 1 then
  redis.call('HINCRBY', KEYS[3], 'queued', 1)
end
return 1
