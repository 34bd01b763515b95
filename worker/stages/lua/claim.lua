-- A job's first step (worker.stages.lock.claim): clear the session's queued
-- marker if it names this job, read the latest hand-over and, when there is
-- one, take the session lock, in one round trip.
-- KEYS: queued marker, payload, lock. ARGV: job id, lock token, lock ttl ms.
-- Returns {payload or nil, 1 when the lock was taken}. No payload, no lock:
-- there is nothing to work on.
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
local payload = redis.call('GET', KEYS[2])
if not payload then return {payload, 0} end
if redis.call('SET', KEYS[3], ARGV[2], 'NX', 'PX', ARGV[3]) then return {payload, 1} end
return {payload, 0}
