-- Release the session lock, only while it still holds this job's token; the
-- session leaves the claimed set with it.
-- KEYS: lock, claimed set. ARGV: token, session id.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('ZREM', KEYS[2], ARGV[2])
  return redis.call('DEL', KEYS[1])
end
return 0
