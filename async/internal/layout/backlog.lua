-- backlog.lua reports how many entries of a voucher's stream the consumer
-- group has not acknowledged yet (not delivered plus pending), whether
-- the sale is over by Redis's clock, and how many orders wait: meta's
-- queued, which the gate counts up by the orders of each entry it adds
-- and ack.lua down by those of each entry it acknowledges (an entry holds
-- a gate batch). Its cost does not grow with the backlog (issue 34): it
-- never reads the entries.
--
-- KEYS[1] orders stream, KEYS[2] meta hash
-- ARGV[1] consumer group
--
-- Returns {entries, ended (1 or 0), orders}; {0, ended, 0} when there is
-- no stream. Without queued (keys written before it existed) the orders
-- are the entries: each held one.
--
-- Not delivered: the group's lag, which Redis 7 keeps in O(1): entries
-- added to the stream minus the group's entries read, or, for a group that
-- has read nothing yet (load.lua creates it at 0), the stream's length;
-- 0 when the group's last delivered entry is the stream's last. Pending:
-- the group's count. Neither reads an entry.
--
-- Redis 7 answers no lag when it cannot count it exactly (an entry
-- deleted with XDEL after the group's last delivered one; XTRIM does not
-- count), and an embedded Redis (miniredis, the demo) reports no
-- entries-read and the stream's length as the lag. Only then does it read
-- XINFO STREAM (which returns the first and last entries whole: a gate
-- batch's hundreds of values) to see whether everything was delivered,
-- and if not counts what follows the last delivered entry with XRANGE: a
-- scan, which the pipeline's own streams never take on Redis 7 (nothing
-- of it XDELs; TestBacklogCostDoesNotGrow).
local ended = 0
local m = redis.call('HMGET', KEYS[2], 'end', 'queued')
local stop, queued = tonumber(m[1]), tonumber(m[2])
if stop then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000000 + tonumber(t[2]) >= stop then
    ended = 1
  end
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {0, ended, 0}
end
-- result reports a backlog of n entries.
local function result(n)
  return {n, ended, math.max(queued or n, 0)}
end
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local info = {}
  for i = 1, #g, 2 do
    info[g[i]] = g[i + 1]
  end
  if info['name'] == ARGV[1] then
    local lag, last = info['lag'], info['last-delivered-id']
    if not info['entries-read'] and last ~= '0-0' then
      lag = false -- miniredis
    end
    if not lag then
      local stream = redis.call('XINFO', 'STREAM', KEYS[1])
      for i = 1, #stream, 2 do
        if stream[i] == 'last-generated-id' and stream[i + 1] == last then
          lag = 0 -- everything was delivered
        end
      end
    end
    if not lag then
      lag = #redis.call('XRANGE', KEYS[1], '(' .. last, '+')
    end
    return result(lag + info['pending'])
  end
end
-- No group: nothing consumes the stream, all of it is waiting.
return result(redis.call('XLEN', KEYS[1]))
