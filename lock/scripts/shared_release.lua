-- release: drop the caller's hold, or its place in the queue, and serve
-- the waiters its hold made room for. Returns 1 if the caller held, else 0.
-- Running it twice with one token is harmless.

-- #include shared_common.lua

purge()
redis.call('ZREM', queue, token .. '/' .. ARGV[3] .. '/' .. ARGV[4])
redis.call('ZREM', alive, token .. '/' .. ARGV[3] .. '/' .. ARGV[4])
local n = redis.call('ZREM', holders, token)
if n == 1 and redis.call('GET', owner) == token then redis.call('DEL', owner) end
serve()
return n
