-- The recovery pass (worker.protocol.lock.recover_abandoned): sessions in the
-- claimed set whose deadline passed. A session whose lock is gone was
-- abandoned (its worker died): it leaves the set and is returned, for a new
-- job. One whose lock is still held (by a later job, or a slow extension)
-- gets the lock's own expiry as its new deadline.
-- Sessions in the pending set whose job was not claimed by its deadline are
-- returned too (their job's worker may have died before claiming), unless
-- their queued job (the session's queued marker names it) is still on its
-- way: waiting in the queue (its job key there, not in progress), or in
-- progress in a worker whose heartbeat lists it (live_jobs:
-- worker/protocol/lua/orphans.lua, loaded before this script). Such a session
-- stays pending with a new deadline, the grace from now: a queue backed up
-- behind busy workers, or a worker slow to reach the claim on a loaded
-- machine, is not an abandoned session, and a second job for it would only
-- be run for nothing (a job merely waiting would take the new one in anyway).
--
-- KEYS[1]  the claimed set (memfleet:claimed:<queue>)
-- KEYS[2]  the pending set (memfleet:pending:<queue>)
-- KEYS[3]  the queue (<queue>)
-- KEYS[4]  the workers hash (memfleet:workers:<queue>)
-- ARGV[1]  now (ms)
-- ARGV[2]  the lock's key prefix (memory-task-lock:)
-- ARGV[3]  the most sessions taken from each set
-- ARGV[4]  the queued marker's key prefix (memfleet:queued:)
-- ARGV[5]  ARQ's job key prefix (arq:job:)
-- ARGV[6]  ARQ's in-progress key prefix (arq:in-progress:)
-- ARGV[7]  the pending grace (ms): a session's new deadline, from now, while its
--          job is on its way
-- Returns the session keys ({<user>}:<session id>) to queue a job for (one may
-- come from both sets).
local now = tonumber(ARGV[1])
local abandoned = {}
local late = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
local live = nil  -- the jobs live workers list, read at the first late session

local function on_its_way(session)
  local job = redis.call('GET', ARGV[4] .. session)
  if not job then return false end
  if redis.call('EXISTS', ARGV[6] .. job) == 1 then
    if live == nil then
      local time = redis.call('TIME')
      live = live_jobs(KEYS[4], tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000))
    end
    return live[job] == true
  end
  return redis.call('ZSCORE', KEYS[3], job) ~= false and redis.call('EXISTS', ARGV[5] .. job) == 1
end

for _, session in ipairs(late) do
  if on_its_way(session) then
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[7]), session)
  else
    redis.call('ZREM', KEYS[2], session)
    table.insert(abandoned, session)
  end
end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
for _, session in ipairs(due) do
  local ttl = redis.call('PTTL', ARGV[2] .. session)
  if ttl > 0 then
    redis.call('ZADD', KEYS[1], now + ttl, session)
  else
    redis.call('ZREM', KEYS[1], session)
    table.insert(abandoned, session)
  end
end
return abandoned
