-- One manual fact write of a user against the user's rate, fleet-wide (worker.api.write_rate):
-- GCRA, a token bucket kept as one number, the theoretical arrival time (TAT) of the
-- next write, on the Redis server's clock. A write is allowed when it comes no more
-- than (burst - 1) intervals before its TAT; each allowed write moves the TAT on by
-- one interval. The key lapses once the bucket is full again.
-- The same script keeps the erase and consent-change rate (memfleet:api-erases:<keyed user>).
-- KEYS[1]  memfleet:api-fact-writes:{<user>}, or memfleet:api-erases:<keyed user>
-- ARGV[1]  the interval between writes at the steady rate (ms)
-- ARGV[2]  the burst: writes allowed at once
-- Returns 0 when the write may go, else how long (ms) until one may.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then
    tat = now
end
local wait = tat + interval - burst * interval - now
if wait > 0 then
    return wait
end
redis.call('SET', KEYS[1], tat + interval, 'PX', tat + interval - now)
return 0
