-- answer.lua keeps a request's answer under its idempotency key, if the
-- request still holds the key; or gives the key up (ARGV[3] empty), so a
-- retry runs anew.
--
-- KEYS[1] the key's record
-- ARGV[1] the request's token, ARGV[2] its fingerprint, ARGV[3] the answer
-- (JSON; "" to give the key up), ARGV[4] how long to keep it, ms
--
-- Returns 1 when it wrote, 0 when the request had lost the key (its lease
-- ran out and another request took it).
if redis.call('GET', KEYS[1]) ~= 'p|' .. ARGV[2] .. '|' .. ARGV[1] then
  return 0
end
if ARGV[3] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], 'd|' .. ARGV[2] .. '|' .. ARGV[3], 'PX', ARGV[4])
end
return 1
