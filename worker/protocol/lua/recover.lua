-- The recovery pass (worker.protocol.lock.recover_abandoned): sessions in the
-- claimed set whose deadline passed. A session whose lock is gone was
-- abandoned (its worker died): it leaves the set and is returned, for a new
-- job. One whose lock is still held (by a later job, or a slow extension)
-- gets the lock's own expiry as its new deadline.
-- Sessions in the pending set whose job was not claimed by its deadline are
-- returned too (their job's worker may have died before claiming); queueing
-- them again is harmless when their job is merely still waiting.
--
-- KEYS[1]  the claimed set (memfleet:claimed:<queue>)
-- KEYS[2]  the pending set (memfleet:pending:<queue>)
-- ARGV[1]  now (ms)
-- ARGV[2]  the lock's key prefix (memory-task-lock:)
-- ARGV[3]  the most sessions taken from each set
-- Returns the session keys ({<user>}:<session id>) to queue a job for (one may
-- come from both sets).
local abandoned = {}
local late = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
for _, session in ipairs(late) do
  redis.call('ZREM', KEYS[2], session)
  table.insert(abandoned, session)
end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
for _, session in ipairs(due) do
  local ttl = redis.call('PTTL', ARGV[2] .. session)
  if ttl > 0 then
    redis.call('ZADD', KEYS[1], tonumber(ARGV[1]) + ttl, session)
  else
    redis.call('ZREM', KEYS[1], session)
    table.insert(abandoned, session)
  end
end
return abandoned
