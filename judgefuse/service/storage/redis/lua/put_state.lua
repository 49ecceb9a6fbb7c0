-- KEYS: the state blob. ARGV: expected version, body JSON. Compare-and-set: the new
-- version, or -1 when the stored version is not the expected one (nothing written).
local v = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if v ~= tonumber(ARGV[1]) then return -1 end
redis.call('HSET', KEYS[1], 'version', v + 1, 'body', ARGV[2])
return v + 1
