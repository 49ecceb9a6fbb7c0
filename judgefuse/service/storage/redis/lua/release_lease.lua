-- KEYS: the named lease. ARGV: owner. Deletes it only when the owner holds it: 1, else 0.
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
