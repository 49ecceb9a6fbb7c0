-- KEYS: claim. ARGV: owner. Deletes the claim only when the owner still holds it.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
