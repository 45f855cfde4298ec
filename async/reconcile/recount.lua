-- recount.lua (after entry.lua) counts the orders of the entries of a
-- voucher's stream that the consumer group has not acknowledged, and
-- compares the count with meta's queued, which the gate and the acks keep
-- (layout/backlog.lua); with ARGV[2] = "1" it writes the count there. One
-- script: no entry is added or acknowledged between the count and the
-- write. It reads the whole backlog, as reconciliation does anyway.
--
-- KEYS[1] orders stream, KEYS[2] meta hash
-- ARGV[1] consumer group, ARGV[2] "1" to write the count
--
-- Returns {queued (-1 when absent), counted}; {-2, 0} when the voucher is
-- not loaded.
if redis.call('EXISTS', KEYS[2]) == 0 then
  return {-2, 0}
end
local counted = 0
for _, e in ipairs(unacked_entries(KEYS[1], ARGV[1])) do
  counted = counted + #entry_orders(e[2])
end
local queued = tonumber(redis.call('HGET', KEYS[2], 'queued')) or -1
if ARGV[2] == '1' and queued ~= counted then
  redis.call('HSET', KEYS[2], 'queued', counted)
end
return {queued, counted}
