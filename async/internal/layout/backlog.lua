-- backlog.lua reports how many entries of a voucher's stream the consumer
-- group has not acknowledged yet (not delivered plus pending), and whether
-- the sale is over by Redis's clock. Its cost does not grow with the
-- backlog (issue 34): it never reads the entries.
--
-- KEYS[1] orders stream, KEYS[2] meta hash
-- ARGV[1] consumer group
--
-- Returns {backlog, ended (1 or 0)}; {0, 0} when the voucher is not loaded.
--
-- Not delivered: the group's lag, which Redis 7 keeps in O(1): entries
-- added to the stream minus the group's entries read, or, for a group that
-- has read nothing yet (load.lua creates it at 0), the stream's length.
-- Redis reports no lag only after an XDEL left a tombstone past the
-- group's last delivered entry, or for a group created at an explicit id
-- that has not read since; nothing of the pipeline does either (ack.lua
-- trims with XTRIM MINID, which leaves none). Pending: the group's count.
--
-- An embedded Redis (miniredis, the demo) reports no entries-read and the
-- stream's length as the lag: it is believed only while the group has
-- read nothing; past that, and where Redis reports no lag, what follows
-- the last delivered entry is counted (a scan: never taken on Redis 7 by
-- the pipeline's own streams; BenchmarkBacklogCost checks it stays flat).
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
    local lag = info['lag']
    if not info['entries-read'] and info['last-delivered-id'] ~= '0-0' then
      lag = false
    end
    if not lag then
      lag = #redis.call('XRANGE', KEYS[1], '(' .. info['last-delivered-id'], '+')
    end
    return {lag + info['pending'], ended}
  end
end
-- No group: nothing consumes the stream, all of it is waiting.
return {redis.call('XLEN', KEYS[1]), ended}
