-- A job's first step (worker.stages.lock.claim): clear the session's queued
-- marker if it names this job, read the latest hand-over and, when there is
-- one, take the session lock, in one round trip. A session whose lock is
-- taken is listed in the claimed set until its lock expires, so the recovery
-- pass finds it if this worker dies.
-- KEYS: queued marker, payload, lock, claimed set. ARGV: job id, lock token,
-- lock ttl ms, session id, now ms.
-- Returns {payload or nil, 1 when the lock was taken}. No payload, no lock:
-- there is nothing to work on.
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
local payload = redis.call('GET', KEYS[2])
if not payload then return {payload, 0} end
if redis.call('SET', KEYS[3], ARGV[2], 'NX', 'PX', ARGV[3]) then
  redis.call('ZADD', KEYS[4], tonumber(ARGV[5]) + tonumber(ARGV[3]), ARGV[4])
  return {payload, 1}
end
return {payload, 0}
