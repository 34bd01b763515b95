-- Pause every replica's model calls (worker.protection.budget.RedisBudget.pause): the
-- endpoint answered 429 with a Retry-After. A pause is only ever lengthened, so
-- a short hint never cuts a longer one short.
--
-- KEYS[1]  paused-until (string: the pause's end, ms on the Redis clock)
-- ARGV[1]  the pause (ms)
-- Returns the ms left of the pause.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local pause = tonumber(ARGV[1])
local ends = now + pause
local current = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if ends > current then
  redis.call('SET', KEYS[1], string.format('%.0f', ends), 'PX', string.format('%.0f', pause))
  return pause
end
return current - now
