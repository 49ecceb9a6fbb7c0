-- KEYS: queue strata, lease owners, review leases, audit leases. ARGV: id, annotator, now.
-- Returns 1 released, 0 the annotator holds no live lease on the item (nothing written).
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
local leases = KEYS[3]
if redis.call('HGET', KEYS[1], ARGV[1]) == 'audit' then leases = KEYS[4] end
local expires = redis.call('ZSCORE', leases, ARGV[1])
if not expires or tonumber(expires) <= tonumber(ARGV[3]) then return 0 end
redis.call('ZREM', leases, ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
