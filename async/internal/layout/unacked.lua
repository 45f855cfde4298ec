-- unacked.lua (after entry.lua) lists the orders of a voucher's stream
-- that the consumer group has not acknowledged: not delivered yet, or
-- delivered and pending. Acknowledged entries left before the trim point
-- are persisted or dead-lettered, and are not listed.
--
-- KEYS[1] orders stream
-- ARGV[1] consumer group
--
-- Returns a flat list of order ids and their quantities.
local out = {}
for _, e in ipairs(unacked_entries(KEYS[1], ARGV[1])) do
  for _, o in ipairs(entry_orders(e[2])) do
    if o.order then
      out[#out + 1] = o.order
      out[#out + 1] = o.q
    end
  end
end
return out
