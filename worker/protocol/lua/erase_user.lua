-- An erase's Redis half (worker.protocol.queue.erase_user), in one step: delete every
-- hand-over of the user (latest lists, their meta, older lists, queued
-- markers), the user's session set, the ARQ jobs queued for the user and the
-- user's sessions in the pending and waiting sets, and read the Redis clock.
-- Every hand-over made before this script has a number at or below that clock
-- (worker/protocol/lua/enqueue.lua numbers hand-overs from it), so the number is the
-- fence PostgreSQL keeps against commits of such hand-overs.
--
-- Its work is the user's, never the fleet's: everything is found from keys of the
-- user's own, and the shared queue, pending and waiting sets are only touched by
-- member (ZREM), never read.
-- Sessions: the user's session set, which enqueue.lua keeps (a hand-over, and a
-- re-drive, list the session). Pending and waiting members are session keys
-- ({user}:session), so the user's are the set's ids after the hash tag.
-- Jobs: job ids are random (an audit row keeps its job id, so the id must not
-- name the user). The user's are those the user's job index lists (enqueue.lua
-- adds every job it queues, also one ARQ queues again after a failed try: the
-- same id) and those the sessions' queued markers name (a job queued by a
-- release before the index, not started yet). A job a worker is running (ARQ's
-- in-progress key) is left to it, and stays in the index: it finds no
-- hand-over, or meets the fence, and ARQ drops its keys when it ends; if ARQ
-- queues it again, the next erase finds it.
--
-- KEYS[1]  the user's session set (memfleet:sessions:{<user>})
-- KEYS[2]  the queue (<queue>)
-- KEYS[3]  the pending set (memfleet:pending:<queue>)
-- KEYS[4]  the waiting set (memfleet:waiting:<queue>)
-- KEYS[5]  the user's active set (memfleet:active:{<user>}; enqueue.lua's cap)
-- KEYS[6]  the user's job index (memfleet:jobs:{<user>})
-- ARGV[1]  the user's hash tag ({<user>})
-- ARGV[2]  the latest list's key prefix (memfleet:handover:)
-- ARGV[3]  the meta's key prefix (memfleet:handover-meta:)
-- ARGV[4]  the backlog's key prefix (memfleet:backlog:)
-- ARGV[5]  the queued marker's key prefix (memfleet:queued:)
-- ARGV[6]  ARQ's job key prefix (arq:job:)
-- ARGV[7]  ARQ's in-progress key prefix (arq:in-progress:)
-- ARGV[8]  ARQ's retry key prefix (arq:retry:)
-- Returns {the clock in microseconds, the session ids, hand-overs deleted,
-- jobs deleted}: the sessions with a list or its meta (an idle session's
-- finished list is dropped, its meta stays: worker/protocol/lua/release.lua).
local tag = ARGV[1]
local jobs = 0

-- Whether the job is gone now (false: a worker runs it).
local function drop_job(id)
  if redis.call('EXISTS', ARGV[7] .. id) == 1 then return false end
  local removed = redis.call('DEL', ARGV[6] .. id, ARGV[8] .. id)
  removed = removed + redis.call('ZREM', KEYS[2], id)
  if removed > 0 then jobs = jobs + 1 end
  return true
end

local sessions = redis.call('SMEMBERS', KEYS[1])
local deleted = 0
for _, sid in ipairs(sessions) do
  local suffix = tag .. ':' .. sid
  if redis.call('DEL', ARGV[2] .. suffix, ARGV[3] .. suffix) > 0 then
    deleted = deleted + 1
  end
  local queued = redis.call('GET', ARGV[5] .. suffix)
  if queued then drop_job(queued) end
  redis.call('DEL', ARGV[4] .. suffix, ARGV[5] .. suffix)
  redis.call('ZREM', KEYS[3], suffix)
  redis.call('ZREM', KEYS[4], suffix)
end
redis.call('DEL', KEYS[1], KEYS[5])

for _, id in ipairs(redis.call('ZRANGE', KEYS[6], 0, -1)) do
  if drop_job(id) then redis.call('ZREM', KEYS[6], id) end
end

local time = redis.call('TIME')
return {string.format('%.0f', tonumber(time[1]) * 1000000 + tonumber(time[2])), sessions,
        deleted, jobs}
