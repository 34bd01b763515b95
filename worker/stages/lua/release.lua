-- At a job's end (worker.stages.lock.SessionLock.release): settle the session's
-- lists in the same round trip, then release the session lock, only while it
-- still holds this job's token; the session leaves the claimed set with it.
-- Settling drops the backlog lists a commit finished, oldest first, and marks
-- the latest list finished if it is still the one the run finished, so the
-- next hand-over need not keep it. Both are facts of the committed cursor, so
-- they hold whoever has the lock now.
-- KEYS: lock, claimed set, backlog, hand-over meta. ARGV: token, session id,
-- drop older lists numbered up to this (0: none), the latest list's number
-- when the run finished it (0: it did not).
local through = tonumber(ARGV[3])
while through > 0 do
  local head = redis.call('LINDEX', KEYS[3], 0)
  if not head or tonumber(string.match(head, '^(%d+):') or '0') > through then break end
  redis.call('LPOP', KEYS[3])
end
if ARGV[4] ~= '0' and redis.call('HGET', KEYS[4], 'q') == ARGV[4] then
  redis.call('HSET', KEYS[4], 'd', ARGV[4])
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('ZREM', KEYS[2], ARGV[2])
  return redis.call('DEL', KEYS[1])
end
return 0
