-- Admit one turn of the chat stand-in (api_stub.chat_log) before it is answered, on the
-- Redis server's clock: first the user's cap on sessions (those with a turn within the
-- lists' lifetime; a session already counted always goes on), then the user's turn
-- rate (GCRA, as fact_write_rate.lua: the theoretical arrival time of the next turn).
-- A refused turn changes nothing; an admitted one counts its session from now, so
-- turns racing to open sessions never pass the cap.
-- KEYS[1]  chat:sessions:{<user>}, the user's session ids by their last turn (ms)
-- KEYS[2]  chat:turns:{<user>}, the rate's next arrival (ms)
-- ARGV[1]  the session id
-- ARGV[2]  the most sessions with a turn within the lifetime
-- ARGV[3]  the lifetime of the stand-in's lists (ms)
-- ARGV[4]  the interval between turns at the steady rate (ms; 0: no rate)
-- ARGV[5]  the burst: turns allowed at once
-- Returns {0, 0} when admitted; {1, ms until the oldest session lapses} when the cap
-- refuses it; {2, ms until a turn may go} when the rate does.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local lifetime = tonumber(ARGV[3])
if redis.call('TYPE', KEYS[1])['ok'] == 'set' then
  -- An older stand-in's set of session ids, without times: each counts from now.
  local ids = redis.call('SMEMBERS', KEYS[1])
  redis.call('DEL', KEYS[1])
  for _, sid in ipairs(ids) do
    redis.call('ZADD', KEYS[1], now, sid)
  end
end
-- A session whose last turn is a lifetime old has no list left: it no longer counts.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - lifetime)
if not redis.call('ZSCORE', KEYS[1], ARGV[1])
    and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {1, tonumber(oldest[2]) + lifetime - now}
end
local interval = tonumber(ARGV[4])
if interval > 0 then
  local burst = tonumber(ARGV[5])
  local tat = tonumber(redis.call('GET', KEYS[2]) or now)
  if tat < now then
    tat = now
  end
  local wait = tat + interval - burst * interval - now
  if wait > 0 then
    return {2, wait}
  end
  redis.call('SET', KEYS[2], tat + interval, 'PX', tat + interval - now)
end
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('PEXPIRE', KEYS[1], lifetime)
return {0, 0}
