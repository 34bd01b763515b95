-- One turn of the chat stand-in (api_stub.chat_log): append the user's message and the
-- answer to the session's list, trim it to its newest messages, and read it back, in
-- one atomic call. The byte bound keeps the newest messages whose JSON fits it (never
-- fewer than this turn's two): no more than a hand-over sends. The Redis clock as the
-- list was read is the hand-over's listed_at_us, so a list read before an erase of its
-- user stores nothing.
-- KEYS[1]  chat:session:{<user>}:<session id>, the session's list
-- KEYS[2]  chat:sessions:{<user>}, the user's session ids by their last turn (ms)
-- ARGV[1]  the user's message (JSON)
-- ARGV[2]  the answer (JSON)
-- ARGV[3]  the session id
-- ARGV[4]  the most messages kept
-- ARGV[5]  the TTL of both keys (ms): a session's list lapses its TTL after the score
--          its id gets here, which chat_admit_turn.lua counts on
-- ARGV[6]  the most bytes kept (0: no byte bound)
-- Returns {seconds, microseconds} of the Redis clock, then the list.
local now = redis.call('TIME')
redis.call('RPUSH', KEYS[1], ARGV[1], ARGV[2])
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[4]), -1)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[2], tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000),
           ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
local items = redis.call('LRANGE', KEYS[1], 0, -1)
local max_bytes = tonumber(ARGV[6])
if max_bytes > 0 then
  local total, keep = 0, 0
  for i = #items, 1, -1 do
    total = total + string.len(items[i])
    if total > max_bytes and keep >= 2 then break end
    keep = keep + 1
  end
  if keep < #items then
    redis.call('LTRIM', KEYS[1], -keep, -1)
    items = redis.call('LRANGE', KEYS[1], 0, -1)
  end
end
local time = redis.call('TIME')
return {time[1], time[2], items}
