-- The hand-over (worker.queue.enqueue): store the session's latest message
-- list, and queue one job for the session unless one is already waiting.
-- A job a worker has picked (ARQ's in-progress key) is not waiting: if that
-- worker died before claiming the session, coalescing into its job would
-- stall the session until ARQ's in-progress key expires.
-- The session is (re)listed in the pending set with a deadline: if no job has
-- claimed it by then, the recovery pass looks at it again (a worker may have
-- died between picking its job and claiming the session).
-- KEYS: payload, queued marker, queue, pending set. ARGV: payload or "",
-- payload ttl ms, job id, job bytes, score, job expiry ms, ARQ's job key
-- prefix, ARQ's in-progress key prefix, session id, pending deadline ms.
if ARGV[1] ~= '' then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
redis.call('ZADD', KEYS[4], ARGV[10], ARGV[9])
local queued = redis.call('GET', KEYS[2])
if queued and redis.call('EXISTS', ARGV[7] .. queued) == 1
   and redis.call('EXISTS', ARGV[8] .. queued) == 0 then
  return false
end
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[6])
redis.call('SET', ARGV[7] .. ARGV[3], ARGV[4], 'PX', ARGV[6])
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[3])
return ARGV[3]
