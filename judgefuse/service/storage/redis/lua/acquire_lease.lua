-- KEYS: the named lease. ARGV: owner, now, expires_at, key expiry in ms.
-- Takes a free or expired lease, or renews the owner's own: 1; 0 while another owner holds it.
local holder = redis.call('HGET', KEYS[1], 'owner')
local expires = tonumber(redis.call('HGET', KEYS[1], 'expires_at') or '0')
if holder and holder ~= ARGV[1] and expires > tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'expires_at', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
