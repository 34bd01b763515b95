-- Take a queued ARQ job for this worker: what ARQ 0.28's start_jobs does with
-- WATCH, EXISTS, ZSCORE and MULTI/PSETEX/EXEC (four round trips), in one.
--
-- KEYS[1]  the job's in-progress key (arq:in-progress:<job id>)
-- KEYS[2]  the queue (<queue>, a sorted set)
-- ARGV[1]  the job's id
-- ARGV[2]  now (ms, the worker's clock, as ARQ's)
-- ARGV[3]  the in-progress key's lifetime (ms)
-- Returns the job's score, or false: another worker runs it, it is finished
-- (no longer queued), or it is not due yet (deferred again meanwhile).
if redis.call('EXISTS', KEYS[1]) == 1 then
    return false
end
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then
    return false
end
redis.call('PSETEX', KEYS[1], ARGV[3], '1')
return score
