-- Shared by the scripts that tell the jobs of dead workers (worker/protocol/lua/fleet_probe.lua
-- counts them, worker/protocol/lua/retire_orphans.lua retires them):
-- worker.protocol.scripts.LuaScript puts this file before each of them, so both
-- tell them the same way. Not a script of its own: it defines live_jobs and
-- watch_suspects and touches only the keys its callers pass them.
--
-- A job ARQ picked stays in the queue until it ends, with an in-progress key
-- that lives the job timeout + 10 s. Each worker lists the jobs it runs in the
-- workers hash (worker.fleet.probe.beat), with the moment its entry lapses (on
-- the Redis clock). An in-progress job no live worker lists is a suspect; the
-- suspects hash keeps when it was first seen so. One still a suspect after the
-- slack (a just-picked job may not be in its worker's last beat yet) is held by
-- a dead worker: orphaned.
--
-- KEYS: none
-- ARGV: none
-- Returns nothing.

-- The jobs live workers list (a set) and how many workers are live; a lapsed
-- entry is dropped.
local function live_jobs(workers_key, now)
  local live, workers = {}, 0
  local entries = redis.call('HGETALL', workers_key)
  for i = 1, #entries, 2 do
    local until_ms, jobs = string.match(entries[i + 1], '^(%d+)|(.*)$')
    if until_ms and tonumber(until_ms) >= now then
      workers = workers + 1
      for job in string.gmatch(jobs, '[^,]+') do live[job] = true end
    else
      redis.call('HDEL', workers_key, entries[i])
    end
  end
  return live, workers
end

-- The suspects, job id -> ms first seen unlisted. ``unlisted`` (a set) holds the
-- jobs the caller just found in progress and not in ``live``: each is added
-- unless already there. Any other entry stays while its job is still in the
-- queue, in progress and unlisted (the caller looked at part of the queue), and
-- goes otherwise (listed again, or ended).
local function watch_suspects(suspects_key, queue_key, in_progress_prefix, unlisted, live, now)
  local now_text = string.format('%.0f', now)
  for job in pairs(unlisted) do redis.call('HSETNX', suspects_key, job, now_text) end
  local watched = {}
  local entries = redis.call('HGETALL', suspects_key)
  for i = 1, #entries, 2 do
    local job = entries[i]
    if unlisted[job] or (not live[job] and redis.call('EXISTS', in_progress_prefix .. job) == 1
                         and redis.call('ZSCORE', queue_key, job)) then
      watched[job] = tonumber(entries[i + 1])
    else
      redis.call('HDEL', suspects_key, job)
    end
  end
  return watched
end
