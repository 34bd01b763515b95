-- Take a slot of the fleet's model budget (worker.protection.budget.RedisBudget.acquire), or
-- say how long to wait before asking again. Every replica runs this same script
-- on the Redis clock, so the limits hold for the fleet whatever the hosts' clocks.
--
-- KEYS[1]  the log (zset: granted calls by grant time, member "<ticket>:<tokens>")
-- KEYS[2]  the leases (zset: ticket by lease expiry)
-- KEYS[3]  the line (zset: waiting ticket by arrival)
-- KEYS[4]  alive (zset: waiting ticket by when it counts as gone)
-- KEYS[5]  the asks (hash: waiting ticket -> tokens)
-- KEYS[6]  paused-until (string: the pause's end, ms on the Redis clock)
-- ARGV[1]  the ticket (the caller's random id for this call)
-- ARGV[2]  the call's tokens (estimated)
-- ARGV[3]  requests per minute (0: no such limit)
-- ARGV[4]  tokens per minute (0: no such limit)
-- ARGV[5]  concurrent calls (0: no such limit)
-- ARGV[6]  the window (ms)
-- ARGV[7]  the lease (ms)
-- ARGV[8]  the poll (ms)
-- ARGV[9]  the grace (ms)
-- Returns {1, 0, 0} when granted, else {0, wait ms, reason}: reason 1 requests,
-- 2 tokens, 3 concurrency, 4 paused by a 429.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ticket = ARGV[1]
local tokens = tonumber(ARGV[2])
local rpm, tpm, conc = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local window, lease = tonumber(ARGV[6]), tonumber(ARGV[7])
local poll, grace = tonumber(ARGV[8]), tonumber(ARGV[9])

local function ms(x) return string.format('%.0f', x) end
-- Several callers share these keys: a TTL is only ever lengthened here.
local function keep(key, ttl)
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ms(ttl)) end
end
local function tokens_of(member) return tonumber(string.match(member, ':(%d+)$')) or 0 end

-- Forget what is over: calls out of the window, leases of crashed callers,
-- waiters that stopped asking (bounded per call; the rest go on the next calls).
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms(now - window))
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms(now))
local gone = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', ms(now), 'LIMIT', 0, 500)
if #gone > 0 then
  redis.call('ZREM', KEYS[3], unpack(gone))
  redis.call('ZREM', KEYS[4], unpack(gone))
  redis.call('HDEL', KEYS[5], unpack(gone))
end

-- First come, first served: a caller stands behind every live waiter that came
-- before it, so a slot that opens goes to the oldest waiter, not to the fastest poller.
local ahead = redis.call('ZRANK', KEYS[3], ticket)
if not ahead then ahead = redis.call('ZCARD', KEYS[3]) end
local want = tokens
if tpm > 0 then want = math.min(tokens, tpm) end  -- larger than the budget: waits for an empty window

local wait, reason = 0, 0
local function later(delay, why)
  if delay > wait then wait, reason = delay, why end
end

local paused = tonumber(redis.call('GET', KEYS[6]) or '0') or 0
if paused > now then later(paused - now, 4) end

if rpm > 0 then
  local count = redis.call('ZCARD', KEYS[1])
  local free = rpm - count
  if ahead >= free then
    if count == 0 then
      later(poll, 1)
    else
      -- This place in line gets a slot once that many logged calls have left the window.
      local index = math.min(ahead - free, count - 1)
      local oldest = redis.call('ZRANGE', KEYS[1], index, index, 'WITHSCORES')
      later(tonumber(oldest[2]) + window - now, 1)
    end
  end
end

if tpm > 0 then
  local logged = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
  local used = 0
  for i = 1, #logged, 2 do used = used + tokens_of(logged[i]) end
  local before = 0
  if ahead > 0 then
    local line = redis.call('ZRANGE', KEYS[3], 0, ahead - 1)
    local asks = redis.call('HMGET', KEYS[5], unpack(line))
    for _, a in ipairs(asks) do before = before + (tonumber(a) or 0) end
  end
  local over = used + before + want - tpm
  if over > 0 then
    -- Wait until enough of the oldest calls have left the window.
    local freed, at = 0, nil
    for i = 1, #logged, 2 do
      freed = freed + tokens_of(logged[i])
      if freed >= over then
        at = tonumber(logged[i + 1])
        break
      end
    end
    if at then later(at + window - now, 2) else later(poll, 2) end
  end
end

if conc > 0 then
  local busy = redis.call('ZCARD', KEYS[2])
  if ahead >= conc - busy then later(poll, 3) end
end

if wait > 0 then
  redis.call('ZADD', KEYS[3], 'NX', ms(now), ticket)
  redis.call('ZADD', KEYS[4], ms(now + wait + grace), ticket)
  redis.call('HSET', KEYS[5], ticket, ms(want))
  for i = 3, 5 do keep(KEYS[i], wait + grace) end
  return {0, wait, reason}
end

if rpm > 0 or tpm > 0 then
  redis.call('ZADD', KEYS[1], ms(now), ticket .. ':' .. ms(tokens))
  keep(KEYS[1], window)
end
if conc > 0 then
  redis.call('ZADD', KEYS[2], ms(now + lease), ticket)
  keep(KEYS[2], lease)
end
redis.call('ZREM', KEYS[3], ticket)
redis.call('ZREM', KEYS[4], ticket)
redis.call('HDEL', KEYS[5], ticket)
return {1, 0, 0}
