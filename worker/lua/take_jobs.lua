-- Take up to ARGV[3] queued ARQ jobs for this worker in one call: what ARQ 0.28's
-- poll does by reading the queue's head, then, for each job there, a WATCH, an
-- EXISTS, a ZSCORE and a MULTI/PSETEX/EXEC. Jobs that run (on any worker) stay at
-- the head of the queue until they finish, so a fleet's poll would otherwise pay
-- round trips for every job its other workers run.
-- KEYS[1] the queue (sorted set of job ids by due time, ms)
-- ARGV[1] now (ms, the worker's clock, as ARQ's), ARGV[2] the in-progress key's
-- lifetime (ms), ARGV[3] how many jobs to take, ARGV[4] ARQ's in-progress key
-- prefix, ARGV[5] how many due jobs to look at, from the head
-- Returns id, score, id, score... of the jobs taken (their in-progress keys set).
-- The in-progress keys are named here, not in KEYS: a single Redis, as ARQ's.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES',
                       'LIMIT', 0, tonumber(ARGV[5]))
local wanted = tonumber(ARGV[3])
local taken = {}
for i = 1, #due, 2 do
    if #taken >= 2 * wanted then
        break
    end
    local key = ARGV[4] .. due[i]
    if redis.call('EXISTS', key) == 0 then
        redis.call('PSETEX', key, ARGV[2], '1')
        taken[#taken + 1] = due[i]
        taken[#taken + 1] = due[i + 1]
    end
end
return taken
