-- Release the session lock, only while it still holds this job's token.
-- KEYS: lock. ARGV: token.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
