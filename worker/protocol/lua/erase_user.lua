-- An erase's Redis half (worker.protocol.queue.erase_user), in one step: delete every
-- hand-over of the user (latest lists, their meta, older lists, queued
-- markers), the user's session set, the ARQ jobs queued for the user and the
-- user's sessions in the pending and waiting sets, and read the Redis clock.
-- Every hand-over made before this script has a number at or below that clock
-- (worker/protocol/lua/enqueue.lua numbers hand-overs from it), so the number is the
-- fence PostgreSQL keeps against commits of such hand-overs.
--
-- Jobs: job ids are random (an audit row keeps its job id, so the id must not
-- name the user); a job is the user's when its arguments (k.user_id) are. One
-- pass over the queue finds them all, also those no queued marker names (ARQ
-- queued them again after a failure): a job whose bytes hold the user's id as
-- worker.protocol.queue.job_bytes writes it (ARGV[10]) is decoded and compared. A job a worker is running (ARQ's in-progress key) is left to it: it
-- finds no hand-over, or meets the fence, and ARQ drops its keys when it ends.
-- Pending and waiting sets: their members are session keys ({user}:session),
-- so the user's are those that start with the user's hash tag and ':' (ZSCAN
-- MATCH ARGV[11], the same prefix glob-escaped, then compared exactly).
--
-- KEYS[1]  the user's session set (memfleet:sessions:{<user>})
-- KEYS[2]  the queue (<queue>)
-- KEYS[3]  the pending set (memfleet:pending:<queue>)
-- KEYS[4]  the waiting set (memfleet:waiting:<queue>)
-- KEYS[5]  the user's active set (memfleet:active:{<user>}; enqueue.lua's cap)
-- ARGV[1]  the user's hash tag ({<user>})
-- ARGV[2]  the latest list's key prefix (memfleet:handover:)
-- ARGV[3]  the meta's key prefix (memfleet:handover-meta:)
-- ARGV[4]  the backlog's key prefix (memfleet:backlog:)
-- ARGV[5]  the queued marker's key prefix (memfleet:queued:)
-- ARGV[6]  ARQ's job key prefix (arq:job:)
-- ARGV[7]  ARQ's in-progress key prefix (arq:in-progress:)
-- ARGV[8]  ARQ's retry key prefix (arq:retry:)
-- ARGV[9]  the user id
-- ARGV[10] the user id as a job's arguments hold it ('"user_id":' and its JSON string)
-- ARGV[11] the glob of the user's set members (the hash tag and ':', escaped, then '*')
-- Returns {the clock in microseconds, the session ids, hand-overs deleted,
-- jobs deleted}: the sessions with a list or its meta (an idle session's
-- finished list is dropped, its meta stays: worker/protocol/lua/release.lua).
local tag, user, needle = ARGV[1], ARGV[9], ARGV[10]
local jobs = 0

local function drop_job(id)
  if redis.call('EXISTS', ARGV[7] .. id) == 1 then return end  -- a worker runs it
  local removed = redis.call('DEL', ARGV[6] .. id, ARGV[8] .. id)
  removed = removed + redis.call('ZREM', KEYS[2], id)
  if removed > 0 then jobs = jobs + 1 end
end

local function names_user(body)
  local ok, job = pcall(cjson.decode, body)
  return ok and type(job) == 'table' and type(job.k) == 'table' and job.k.user_id == user
end

local sessions = redis.call('SMEMBERS', KEYS[1])
local deleted = 0
for _, sid in ipairs(sessions) do
  local suffix = tag .. ':' .. sid
  if redis.call('DEL', ARGV[2] .. suffix, ARGV[3] .. suffix) > 0 then
    deleted = deleted + 1
  end
  redis.call('DEL', ARGV[4] .. suffix, ARGV[5] .. suffix)
end
redis.call('DEL', KEYS[1], KEYS[5])

for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local body = redis.call('GET', ARGV[6] .. id)
  if body and string.find(body, needle, 1, true) and names_user(body) then drop_job(id) end
end

local prefix = tag .. ':'
for _, set in ipairs({KEYS[3], KEYS[4]}) do
  local cursor = '0'
  repeat
    local page = redis.call('ZSCAN', set, cursor, 'MATCH', ARGV[11], 'COUNT', 1000)
    cursor = page[1]
    for i = 1, #page[2], 2 do
      local member = page[2][i]
      if string.sub(member, 1, #prefix) == prefix then redis.call('ZREM', set, member) end
    end
  until cursor == '0'
end

local time = redis.call('TIME')
return {string.format('%.0f', tonumber(time[1]) * 1000000 + tonumber(time[2])), sessions,
        deleted, jobs}
