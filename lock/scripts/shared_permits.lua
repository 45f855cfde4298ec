-- permits: set the number of permits to ARGV[6] and serve the waiters
-- that now fit. Holders beyond a lowered number keep their permits; new
-- ones wait until the holders are fewer than the new number. Returns 1.

-- #include shared_common.lua

redis.call('SET', permitsKey, ARGV[6])
purge()
serve()
return 1
