-- Keep the session lock alive, only while it still holds this job's token,
-- and move the session's deadline in the claimed set with it.
-- KEYS: lock, claimed set. ARGV: token, ttl ms, session id, now ms.
-- Returns 1 when extended, 0 when lost.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('ZADD', KEYS[2], tonumber(ARGV[4]) + tonumber(ARGV[2]), ARGV[3])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
