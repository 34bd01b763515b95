-- Take one of a user's export slots, fleet-wide (worker.api.exports): a sorted set of
-- leases scored by their expiry on the Redis server's clock, so that a crashed API
-- process's lease lapses by itself.
-- KEYS[1]  memfleet:api-exports:{<user>}
-- ARGV[1]  the lease's id (random)
-- ARGV[2]  the most leases the user may hold at once
-- ARGV[3]  the lease's lifetime (ms); a live export renews it (export_lease_renew.lua)
-- Returns 1 when the lease is taken, 0 when the user holds the most already.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local lifetime = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
    return 0
end
redis.call('ZADD', KEYS[1], now + lifetime, ARGV[1])
redis.call('PEXPIRE', KEYS[1], lifetime)
return 1
