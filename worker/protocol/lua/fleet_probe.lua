-- The fleet's state in one round trip (worker.fleet.probe.probe), read by the one
-- exporter process: the queue split by state, the oldest ready job's age, the
-- live workers, and the lag: the age of the oldest hand-over no commit has
-- covered yet.
--
-- A job ARQ picked stays in the queue until it ends, with an in-progress key:
-- a due job with that key is in progress, one without it is ready. An
-- in-progress job held by a dead worker is orphaned (live_jobs and
-- watch_suspects: worker/protocol/lua/orphans.lua, loaded before this script)
-- until a worker's recovery pass retires it (worker/protocol/lua/retire_orphans.lua)
-- or ARQ's in-progress key expires.
-- The waiting set holds sessions with a hand-over no commit has covered,
-- scored by that hand-over's time; a member whose meta is gone (erased,
-- expired) is dropped here, so it never holds the lag up.
-- KEYS[1]  the queue (<queue>)
-- KEYS[2]  the waiting set (memfleet:waiting:<queue>)
-- KEYS[3]  the workers hash (memfleet:workers:<queue>)
-- KEYS[4]  the suspects hash (memfleet:orphan-suspects:<queue>)
-- ARGV[1]  ARQ's in-progress key prefix (arq:in-progress:)
-- ARGV[2]  the meta's key prefix (memfleet:handover-meta:)
-- ARGV[3]  the orphan slack (ms)
-- ARGV[4]  the most due jobs looked at one by one
-- ARGV[5]  the most stale waiting members dropped
-- Returns {ready, deferred, in progress, orphaned, oldest ready age ms,
-- lag ms, sessions waiting, live workers}.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local slack = tonumber(ARGV[3])

local live, workers = live_jobs(KEYS[3], now)

local now_text = string.format('%.0f', now)
local due = redis.call('ZCOUNT', KEYS[1], '-inf', now_text)
local deferred = redis.call('ZCOUNT', KEYS[1], '(' .. now_text, '+inf')
local looked = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_text, 'WITHSCORES', 'LIMIT', 0,
                          tonumber(ARGV[4]))
local running, oldest_ready = 0, nil
local unlisted = {}
for i = 1, #looked, 2 do
  local job = looked[i]
  if redis.call('EXISTS', ARGV[1] .. job) == 1 then
    running = running + 1
    if not live[job] then unlisted[job] = true end
  elseif not oldest_ready then
    oldest_ready = tonumber(looked[i + 1])
  end
end
-- Counted among the jobs looked at, as the jobs in progress are.
local orphaned = 0
for job, since in pairs(watch_suspects(KEYS[4], KEYS[1], ARGV[1], unlisted, live, now)) do
  if unlisted[job] and now - since > slack then orphaned = orphaned + 1 end
end
-- Beyond the jobs looked at, due jobs count as ready.
local ready = due - running
local ready_age = oldest_ready and math.max(0, now - oldest_ready) or 0

local lag, dropped = 0, 0
while true do
  local head = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if #head == 0 then break end
  if redis.call('EXISTS', ARGV[2] .. head[1]) == 1 or dropped >= tonumber(ARGV[5]) then
    lag = math.max(0, now - tonumber(head[2]))
    break
  end
  redis.call('ZREM', KEYS[2], head[1])
  dropped = dropped + 1
end
return {ready, deferred, running, orphaned, ready_age, lag, redis.call('ZCARD', KEYS[2]),
        workers}
