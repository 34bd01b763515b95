-- Keep the session lock alive, only while it still holds this job's token,
-- and move the session's deadline in the claimed set with it.
--
-- KEYS[1]  the session's lock (memory-task-lock:{<user>}:<session id>)
-- KEYS[2]  the claimed set (memfleet:claimed:<queue>)
-- ARGV[1]  the job's lock token
-- ARGV[2]  the lock's TTL (ms)
-- ARGV[3]  the session key ({<user>}:<session id>)
-- ARGV[4]  now (ms)
-- Returns 1 when extended, 0 when lost.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('ZADD', KEYS[2], tonumber(ARGV[4]) + tonumber(ARGV[2]), ARGV[3])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
