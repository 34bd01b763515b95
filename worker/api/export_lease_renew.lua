-- Renew a live export's lease (worker.api.exports); a lapsed lease is not taken again.
-- KEYS[1]  memfleet:api-exports:{<user>}
-- ARGV[1]  the lease's id
-- ARGV[2]  the lease's lifetime from now (ms)
-- Returns 1 when renewed, 0 when the lease had lapsed.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local lifetime = tonumber(ARGV[2])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == false then
    return 0
end
redis.call('ZADD', KEYS[1], now + lifetime, ARGV[1])
redis.call('PEXPIRE', KEYS[1], lifetime)
return 1
