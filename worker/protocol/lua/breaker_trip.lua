-- Open the fleet's LLM circuit breaker (worker.protection.breaker.trip): one more failure
-- in a row, and no model call for base * 2^(failures - 1) ms, capped. Jobs that
-- fail while it is already open do not lengthen it.
-- The probe, if this was one, is over.
--
-- KEYS[1]  the open flag (memfleet:llm-breaker:open:<queue>; its TTL: the time left open)
-- KEYS[2]  the failures in a row (memfleet:llm-breaker:failures:<queue>)
-- KEYS[3]  the probe (memfleet:llm-breaker:probe:<queue>)
-- ARGV[1]  the shortest open time (ms)
-- ARGV[2]  the longest open time (ms)
-- ARGV[3]  the failure count's lifetime (ms)
-- Returns how many ms the breaker stays open (what was left, when it was open already).
redis.call('DEL', KEYS[3])
local open = redis.call('PTTL', KEYS[1])
if open > 0 then return open end
local failures = redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
local ms = math.floor(math.min(tonumber(ARGV[2]), tonumber(ARGV[1]) * 2 ^ (failures - 1)))
redis.call('SET', KEYS[1], failures, 'PX', ms)
return ms
