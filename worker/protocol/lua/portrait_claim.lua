-- A refresh of the user's portrait starts (worker.fleet.portrait_job): from now on a
-- commit counts toward the next refresh, due a full interval after this one. The
-- state forgets this job as the queued one (a commit now queues a new job: this one
-- may read the facts before that commit lands).
--
-- KEYS[1]  the user's portrait refresh state (memfleet:portrait:{<user>})
-- ARGV[1]  the starting job's id
-- ARGV[2]  the state's TTL (ms)
-- Returns now (ms, Redis clock): when this refresh started.
if redis.call('HGET', KEYS[1], 'j') == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'j')
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('HSET', KEYS[1], 't', now, 'c', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return now
