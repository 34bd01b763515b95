-- Open the fleet's LLM circuit breaker (worker.protocol.breaker.trip): one more failure
-- in a row, and no model call for base * 2^(failures - 1) ms, capped. Jobs that
-- fail while it is already open do not lengthen it.
-- The probe, if this was one, is over.
-- KEYS: open flag, failure count, probe. ARGV: base ms, cap ms, failure count ttl ms.
redis.call('DEL', KEYS[3])
local open = redis.call('PTTL', KEYS[1])
if open > 0 then return open end
local failures = redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
local ms = math.floor(math.min(tonumber(ARGV[2]), tonumber(ARGV[1]) * 2 ^ (failures - 1)))
redis.call('SET', KEYS[1], failures, 'PX', ms)
return ms
