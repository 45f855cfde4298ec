-- Read the state of a batch of tickets. KEYS: 1 waiting, 2 passes, 3 done
-- (hash user -> record:outcome), 4 meta. ARGV per ticket: user, the
-- ticket's score, its round.
-- Returns rate, begin, the units still to be admitted as the last step
-- counted them ('' before any) and the live passes, then per ticket {state, rank,
-- record}: state "waiting" (with its 0-based rank), "admitted" (the pass
-- record, live or spent), "sold_out" or "expired". Only the entry of this
-- very ticket (its score) counts: a buyer who joined again holds another
-- ticket. No TIME: a read-only script may not call it on every server
-- (miniredis), and the ETA is an estimate the caller makes.
local meta = redis.call('HMGET', KEYS[4], 'round', 'rate', 'begin', 'room')
local round = tonumber(meta[1] or '0')
local out = {meta[2] or '0', meta[3] or '0', meta[4] or '', redis.call('HLEN', KEYS[2])}
local function state(user, score, tround)
  local s = redis.call('ZSCORE', KEYS[1], user)
  if s and tonumber(s) == score then
    return {'waiting', redis.call('ZRANK', KEYS[1], user), ''}
  end
  local rec = redis.call('HGET', KEYS[2], user)
  if rec and tonumber(string.match(rec, '^[^:]+')) == score then
    return {'admitted', 0, rec}
  end
  local done = redis.call('HGET', KEYS[3], user)
  if done and tonumber(string.match(done, '^[^:]+')) == score then
    local outcome = string.sub(done, -1)
    local st = 'expired'
    if outcome == 's' or outcome == 'c' then st = 'admitted' elseif outcome == 'o' then st = 'sold_out' end
    return {st, 0, string.sub(done, 1, -3)}
  end
  if tround < round then return {'sold_out', 0, ''} end
  return {'expired', 0, ''}
end
for i = 1, #ARGV, 3 do
  out[#out + 1] = state(ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]))
end
return out
