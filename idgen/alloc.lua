-- Allocates one range of order-ID sequence numbers.
--
-- KEYS[1]  the generator's hash: ts (seconds since the epoch) and seq (the
--          next free sequence number in that second).
-- ARGV[1]  the epoch, in Unix seconds.
-- ARGV[2]  n, the number of sequence numbers wanted (1 .. ARGV[6]).
-- ARGV[3]  floor ts and
-- ARGV[4]  floor seq: the range must start at or after this position. The
--          caller passes the end of its own last range, and, when it asks
--          for a restart, the position just past its high-water mark.
-- ARGV[5]  "1" if a missing hash may be (re)created now, "0" if the caller
--          wants to look its floor up first.
-- ARGV[6]  the sequence numbers of one second (2^32; 2^17 for slotted IDs).
--
-- Returns {status, now, ts, start, count, wait}: status 0 = allocated,
-- 1 = allocated after recreating a missing hash, 2 = the hash is missing and
-- ARGV[5] was "0". count = 0 means nothing was allocated this time: the
-- caller retries after wait microseconds.
--
-- The invariant that makes a lost hash safe: a range is never allocated in
-- a second later than Redis's clock (ts <= now). A recreated hash starts at
-- max(now, floor) + 1, a second in which nothing can have been allocated
-- yet, and hands nothing out until the clock reaches it.
local key = KEYS[1]
local epoch = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local fts, fseq = tonumber(ARGV[3]), tonumber(ARGV[4])
local seqSpace = tonumber(ARGV[6])

local t = redis.call('TIME')
local now = tonumber(t[1]) - epoch
local usec = tonumber(t[2])

local status = 0
local cur = redis.call('HMGET', key, 'ts', 'seq')
local ts, seq = tonumber(cur[1]), tonumber(cur[2])
if ts == nil or seq == nil then
  if ARGV[5] ~= '1' then
    return {2, now, 0, 0, 0, 0}
  end
  status = 1
  ts, seq = math.max(now, fts) + 1, 0
else
  -- A hash behind the caller's floor was rolled back (a replica promoted
  -- before it had every write): never hand out below what the caller holds.
  if ts < fts or (ts == fts and seq < fseq) then
    ts, seq = fts, fseq
  end
  -- The sequence restarts every second.
  if now > ts then
    ts, seq = now, 0
  end
end

-- The second is full: move on when the clock does.
if ts == now and seq >= seqSpace then
  ts, seq = now + 1, 0
end

if ts > now then
  -- A restart, a full second or a clock that went back: wait for the clock.
  redis.call('HSET', key, 'ts', ts, 'seq', seq)
  return {status, now, ts, 0, 0, (ts - now) * 1000000 - usec}
end

local count = math.min(n, seqSpace - seq)
redis.call('HSET', key, 'ts', ts, 'seq', seq + count)
return {status, now, ts, seq, count, 0}
