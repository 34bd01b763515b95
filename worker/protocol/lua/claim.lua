-- A job's first step (worker.protocol.lock.claim): clear the session's queued
-- marker if it names this job, read the latest hand-over and, when there is
-- one, take the session lock, in one round trip. A session whose lock is
-- taken leaves the pending set and is listed in the claimed set until its
-- lock expires, so the recovery pass finds it if this worker dies. A session
-- whose lock is not taken (busy, or the breaker open) stays pending with a
-- fresh deadline: the job queues it again, and if its worker dies first, the
-- recovery pass does.
-- While the fleet's LLM circuit breaker is open (worker.protection.breaker) the lock is
-- not taken: the job defers the session until it closes. Once it closes after
-- failures, one job at a time probes the endpoint (the probe key); the others
-- wait for its verdict.
-- Taking the lock, the job takes every hand-over made so far: the meta's n
-- (the first hand-over after the last claim, for the waiting set's score at
-- release: worker/protocol/lua/release.lua) starts again. A session with no
-- payload (erased, expired) leaves the fleet's waiting set.
--
-- KEYS[1]  the session's queued marker (memfleet:queued:{<user>}:<session id>)
-- KEYS[2]  its latest list (memfleet:handover:...)
-- KEYS[3]  its lock (memory-task-lock:{<user>}:<session id>)
-- KEYS[4]  the claimed set (memfleet:claimed:<queue>)
-- KEYS[5]  the breaker's open flag (memfleet:llm-breaker:open:<queue>)
-- KEYS[6]  the breaker's failure count (memfleet:llm-breaker:failures:<queue>)
-- KEYS[7]  the breaker's probe (memfleet:llm-breaker:probe:<queue>)
-- KEYS[8]  the pending set (memfleet:pending:<queue>)
-- KEYS[9]  the session's meta (memfleet:handover-meta:...)
-- KEYS[10] its backlog (memfleet:backlog:...)
-- KEYS[11] the waiting set (memfleet:waiting:<queue>)
-- ARGV[1]  the job's id
-- ARGV[2]  the lock's token (random, the job's own)
-- ARGV[3]  the lock's TTL (ms)
-- ARGV[4]  the session key ({<user>}:<session id>), as the sets name it
-- ARGV[5]  now (ms)
-- ARGV[6]  the hand-off grace (ms): the new deadline in the pending set when not locked
-- Returns {payload or nil, 1 when the lock was taken, ms to wait for the
-- breaker (0: closed), failures in a row, the payload's hand-over number, and,
-- with the lock, the backlog's older lists; without a payload, 1 when every
-- list is finished}. No payload, no lock: there is nothing to work on.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
local payload = redis.call('GET', KEYS[2])
if not payload then
  redis.call('ZREM', KEYS[8], ARGV[4])
  redis.call('ZREM', KEYS[11], ARGV[4])
  -- No payload because a commit finished every list (the release dropped the
  -- latest, its digest left in the meta's h) is not an erased or expired
  -- session. The release drops it only with no older list left, and a
  -- hand-over stores a new one before anything is added to the backlog: a
  -- list found there now was finished before the latest one.
  local meta = redis.call('HMGET', KEYS[9], 'q', 'd', 'h')
  if meta[3] and meta[1] and meta[1] == meta[2] then
    redis.call('DEL', KEYS[10])
    return {payload, 0, 0, 0, '0', {}, 1}
  end
  return {payload, 0, 0, 0, '0', {}, 0}
end
local now = tonumber(ARGV[5])
local open = redis.call('PTTL', KEYS[5])
local failures = tonumber(redis.call('GET', KEYS[6]) or '0')
if open <= 0 and not (failures > 0 and redis.call('EXISTS', KEYS[7]) == 1)
   and redis.call('SET', KEYS[3], ARGV[2], 'NX', 'PX', ARGV[3]) then
  redis.call('ZREM', KEYS[8], ARGV[4])
  redis.call('ZADD', KEYS[4], now + tonumber(ARGV[3]), ARGV[4])
  redis.call('HDEL', KEYS[9], 'n')
  if failures > 0 then redis.call('SET', KEYS[7], ARGV[2], 'PX', ARGV[3]) end
  return {payload, 1, 0, failures, redis.call('HGET', KEYS[9], 'q') or '0',
          redis.call('LRANGE', KEYS[10], 0, -1)}
end
redis.call('ZADD', KEYS[8], now + tonumber(ARGV[6]), ARGV[4])
if open > 0 then return {payload, 0, open, 0, '0', {}} end
if failures > 0 and redis.call('EXISTS', KEYS[7]) == 1 then
  return {payload, 0, 1, failures, '0', {}}
end
return {payload, 0, 0, failures, '0', {}}
