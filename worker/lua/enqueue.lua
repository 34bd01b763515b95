-- The hand-over (worker.queue.enqueue): store the session's latest message
-- list, and queue one job for the session unless one is already waiting.
-- A job a worker has picked (ARQ's in-progress key) is not waiting: if that
-- worker died before claiming the session, coalescing into its job would
-- stall the session until ARQ's in-progress key expires.
-- KEYS: payload, queued marker, queue. ARGV: payload or "", payload ttl ms,
-- job id, job bytes, score, job expiry ms, ARQ's job key prefix, ARQ's
-- in-progress key prefix.
if ARGV[1] ~= '' then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
local queued = redis.call('GET', KEYS[2])
if queued and redis.call('EXISTS', ARGV[7] .. queued) == 1
   and redis.call('EXISTS', ARGV[8] .. queued) == 0 then
  return false
end
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[6])
redis.call('SET', ARGV[7] .. ARGV[3], ARGV[4], 'PX', ARGV[6])
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[3])
return ARGV[3]
