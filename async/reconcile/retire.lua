-- retire.lua deletes the keys of a voucher whose sale is over, by Redis's
-- clock, whose every order the consumer group has acknowledged and which
-- has no dead letters; MySQL holds all that is left of it.
--
-- KEYS[1] meta hash, KEYS[2] buyers hash, KEYS[3] orders stream,
-- KEYS[4] dead-letter stream, KEYS[5] failed hash, KEYS[6] tries hash,
-- KEYS[7] returned hash, KEYS[8] keyed hash
-- ARGV[1] consumer group
--
-- Returns 1 when it deleted the keys, 0 when the voucher is not done, 2
-- when it has dead letters, 3 when it is not loaded.
local stop = tonumber(redis.call('HGET', KEYS[1], 'end'))
if not stop then
  return 3
end
local t = redis.call('TIME')
if tonumber(t[1]) * 1000000 + tonumber(t[2]) < stop then
  return 0
end
if redis.call('XLEN', KEYS[4]) > 0 then
  return 2
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[3])) do
    local info = {}
    for i = 1, #g, 2 do
      info[g[i]] = g[i + 1]
    end
    if info['pending'] > 0 or #redis.call('XRANGE', KEYS[3], '(' .. info['last-delivered-id'], '+', 'COUNT', 1) > 0 then
      return 0
    end
  end
end
redis.call('DEL', unpack(KEYS))
return 1
