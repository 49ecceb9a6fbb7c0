-- KEYS: version counter, versions hash. ARGV: the record's JSON (without its version).
-- Returns the new version.
local v = redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[2], v, ARGV[1])
return v
