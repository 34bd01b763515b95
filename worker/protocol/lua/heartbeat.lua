-- A worker's heartbeat (worker.fleet.probe.beat): its entry in the workers hash
-- names the jobs it runs and lapses at a deadline on the Redis clock, so the
-- workers' own clocks never matter.
--
-- KEYS[1]  the workers hash (memfleet:workers:<queue>)
-- ARGV[1]  the worker's id (host and pid)
-- ARGV[2]  the entry's lifetime (ms)
-- ARGV[3]  the ids of the jobs it runs, joined by commas
-- Returns 1.
local time = redis.call('TIME')
local deadline = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], ARGV[1], string.format('%.0f', deadline) .. '|' .. ARGV[3])
return 1
