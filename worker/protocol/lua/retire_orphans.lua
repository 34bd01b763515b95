-- The recovery pass's second half (worker.fleet.orphans.retire_orphans): retire the
-- ARQ jobs of dead workers, so that none sits in the queue until ARQ's
-- in-progress key expires (the job timeout + 10 s), counted as work and holding
-- a burst worker up, only for ARQ to run it again to find nothing new.
--
-- A job is retired when both hold, checked here at once:
-- - it is orphaned (live_jobs and watch_suspects: worker/protocol/lua/orphans.lua,
--   loaded before this script): in progress, and listed by no live worker's
--   heartbeat for longer than the slack; never a job the calling worker runs;
-- - its session is owed nothing: it is in neither the pending set nor the
--   claimed set. While it is in one, a job of it is queued or running, or the
--   recovery pass (worker/protocol/lua/recover.lua) has still to queue one: the
--   dead job stays queued meanwhile, so the queue never looks empty while a
--   session waits for its recovery. A job whose job key is gone (expired) can
--   run nothing and is retired; one whose session this script cannot read (a
--   job naming a session id alone, or not memfleet's JSON) is left to ARQ.
-- Retiring is what ARQ does at a job's end: the job's in-progress, job and
-- retry keys go, and it leaves the queue (and the suspects hash).
--
-- KEYS[1]  the queue (<queue>)
-- KEYS[2]  the workers hash (memfleet:workers:<queue>)
-- KEYS[3]  the suspects hash (memfleet:orphan-suspects:<queue>)
-- KEYS[4]  the pending set (memfleet:pending:<queue>)
-- KEYS[5]  the claimed set (memfleet:claimed:<queue>)
-- ARGV[1]  ARQ's in-progress key prefix (arq:in-progress:)
-- ARGV[2]  ARQ's job key prefix (arq:job:)
-- ARGV[3]  ARQ's retry key prefix (arq:retry:)
-- ARGV[4]  the orphan slack (ms)
-- ARGV[5]  the most due jobs looked at one by one
-- ARGV[6]  the ids of the jobs the calling worker runs, joined by commas
-- Returns the ids of the jobs retired.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local slack = tonumber(ARGV[4])

local live = live_jobs(KEYS[2], now)
for job in string.gmatch(ARGV[6], '[^,]+') do live[job] = true end

local unlisted = {}
local looked = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now),
                          'LIMIT', 0, tonumber(ARGV[5]))
for _, job in ipairs(looked) do
  if not live[job] and redis.call('EXISTS', ARGV[1] .. job) == 1 then unlisted[job] = true end
end

-- The session key ({<user>}:<session id>, worker.protocol.keys.SessionRef) the job's
-- arguments name (worker.protocol.queue.job_bytes); nil when it names none.
local function session_of(raw)
  local ok, job = pcall(cjson.decode, raw)
  if not ok or type(job) ~= 'table' or type(job.k) ~= 'table' then return nil end
  local user, session = job.k.user_id, job.k.session_id
  if type(user) ~= 'string' or type(session) ~= 'string' then return nil end
  local tag = user:gsub('%%', '%%25'):gsub('{', '%%7B'):gsub('}', '%%7D')
  return '{' .. tag .. '}:' .. session
end

local function owes_nothing(job)
  local raw = redis.call('GET', ARGV[2] .. job)
  if not raw then return true end
  local session = session_of(raw)
  if not session then return false end
  return not redis.call('ZSCORE', KEYS[4], session) and not redis.call('ZSCORE', KEYS[5], session)
end

local retired = {}
for job, since in pairs(watch_suspects(KEYS[3], KEYS[1], ARGV[1], unlisted, live, now)) do
  if now - since > slack and owes_nothing(job) then
    redis.call('DEL', ARGV[1] .. job, ARGV[2] .. job, ARGV[3] .. job)
    redis.call('ZREM', KEYS[1], job)
    redis.call('HDEL', KEYS[3], job)
    table.insert(retired, job)
  end
end
return retired
