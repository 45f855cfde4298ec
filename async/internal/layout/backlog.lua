-- backlog.lua reports how many entries of a voucher's stream the consumer
-- group has not acknowledged yet (not delivered plus pending), and whether
-- the sale is over by Redis's clock.
--
-- KEYS[1] orders stream, KEYS[2] meta hash
-- ARGV[1] consumer group
--
-- Returns {backlog, ended (1 or 0)}; {0, 0} when the voucher is not loaded.
local ended = 0
local stop = tonumber(redis.call('HGET', KEYS[2], 'end'))
if stop then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000000 + tonumber(t[2]) >= stop then
    ended = 1
  end
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {0, ended}
end
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local info = {}
  for i = 1, #g, 2 do
    info[g[i]] = g[i + 1]
  end
  if info['name'] == ARGV[1] then
    -- Redis 7.0's lag is exact only if no entry was ever deleted with
    -- XDEL (XTRIM does not count): then count what follows the last
    -- delivered entry instead.
    local lag = info['lag']
    -- Without entries-read (miniredis, or a group created at an explicit
    -- id) lag is not known either.
    if not info['entries-read'] then
      lag = false
    end
    local stream = redis.call('XINFO', 'STREAM', KEYS[1])
    for i = 1, #stream, 2 do
      if stream[i] == 'max-deleted-entry-id' and stream[i + 1] ~= '0-0' then
        lag = false
      end
    end
    if not lag then
      lag = #redis.call('XRANGE', KEYS[1], '(' .. info['last-delivered-id'], '+')
    end
    return {lag + info['pending'], ended}
  end
end
-- No group: nothing consumes the stream, all of it is waiting.
return {redis.call('XLEN', KEYS[1]), ended}
