-- Read a ticket's state. KEYS: 1 waiting, 2 passes, 3 done (hash user ->
-- record:outcome), 4 meta. ARGV: 1 user, 2 the ticket's score, 3 its round.
-- Returns {state, rank, record, now, rate, begin}: state "waiting" (with
-- its 0-based rank), "admitted" (the pass record, live or spent),
-- "sold_out" or "expired". Only the entry of this very ticket (its score)
-- counts: a buyer who joined again holds another ticket.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local meta = redis.call('HMGET', KEYS[4], 'round', 'rate', 'begin')
local rate, begin = meta[2] or '0', meta[3] or '0'
local score = tonumber(ARGV[2])
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) == score then
  return {'waiting', redis.call('ZRANK', KEYS[1], ARGV[1]), '', now, rate, begin}
end
local rec = redis.call('HGET', KEYS[2], ARGV[1])
if rec and tonumber(string.match(rec, '^[^:]+')) == score then
  return {'admitted', 0, rec, now, rate, begin}
end
local done = redis.call('HGET', KEYS[3], ARGV[1])
if done and tonumber(string.match(done, '^[^:]+')) == score then
  local outcome = string.sub(done, -1)
  local state = 'expired'
  if outcome == 's' or outcome == 'c' then state = 'admitted' elseif outcome == 'o' then state = 'sold_out' end
  return {state, 0, string.sub(done, 1, -3), now, rate, begin}
end
if tonumber(ARGV[3]) < tonumber(meta[1] or '0') then
  return {'sold_out', 0, '', now, rate, begin}
end
return {'expired', 0, '', now, rate, begin}
