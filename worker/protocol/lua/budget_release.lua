-- Give back a slot of the fleet's model budget (worker.protection.budget.RedisBudget.release),
-- or leave the line without one. The call stays in the log (it was made), its
-- tokens corrected to what the server counted when the caller knows it.
--
-- KEYS[1]  the log (as in budget_acquire.lua)
-- KEYS[2]  the leases
-- KEYS[3]  the line
-- KEYS[4]  alive
-- KEYS[5]  the asks
-- ARGV[1]  the ticket
-- ARGV[2]  the tokens estimated
-- ARGV[3]  the tokens used (negative: keep the estimate)
-- Returns 1.
local ticket = ARGV[1]
redis.call('ZREM', KEYS[2], ticket)
redis.call('ZREM', KEYS[3], ticket)
redis.call('ZREM', KEYS[4], ticket)
redis.call('HDEL', KEYS[5], ticket)
if tonumber(ARGV[3]) >= 0 and ARGV[3] ~= ARGV[2] then
  local estimated = ticket .. ':' .. ARGV[2]
  local at = redis.call('ZSCORE', KEYS[1], estimated)
  if at then
    redis.call('ZREM', KEYS[1], estimated)
    redis.call('ZADD', KEYS[1], at, ticket .. ':' .. ARGV[3])
  end
end
return 1
