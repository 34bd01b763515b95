-- The hand-over (worker.queue.enqueue): store the session's latest message
-- list, keep an older list the new one does not extend, and queue one job for
-- the session unless one is already waiting.
--
-- The latest list is replaced when the new list extends it: the JSON of its
-- messages (the payload's "messages" array, as worker.payload writes it) is a
-- prefix of the new list's. Otherwise, unless a commit already finished the
-- old list (the meta hash: q its hand-over number, d the number of the list a
-- commit finished), the old list goes to the backlog with its number, so the
-- messages only it holds are still processed, in order, before the new ones
-- (the chat server summarised, edited or replaced its history). A full
-- backlog refuses the hand-over (-1): nothing is dropped without a word.
-- Hand-over numbers come from the server clock and never go backwards.
-- A finished latest list may be gone, the SHA-1 of its messages in the meta's
-- h instead (worker/stages/lua/release.lua): all a new list asks of it then is
-- whether it is the same list again.
--
-- A job a worker has picked (ARQ's in-progress key) is not waiting: if that
-- worker died before claiming the session, coalescing into its job would
-- stall the session until ARQ's in-progress key expires.
-- The session is (re)listed in the pending set with a deadline: if no job has
-- claimed it by then, the recovery pass looks at it again (a worker may have
-- died between picking its job and claiming the session).
-- The user's session set lists the session id for an erase.
-- A session with a hand-over no commit has finished is in the fleet's waiting
-- set (worker.fleet), scored by its oldest such hand-over's time in ms; the
-- meta's n keeps the first hand-over since a job last claimed the session
-- (worker/stages/lua/release.lua rescores from it). A queued job with no
-- payload (a re-drive) lists a session that still has an unfinished list.
-- KEYS: payload, queued marker, queue, pending set, meta, backlog, the user's
-- session set, waiting set.
-- ARGV: payload or "", payload ttl ms, job id, job bytes, score, job expiry
-- ms, ARQ's job key prefix, ARQ's in-progress key prefix, session key
-- ({user}:session), pending deadline ms, backlog limit, session id.
-- Returns {the new job's id, or false when a waiting job will read the
-- payload; 1 when the previous list went to the backlog, else 0; the
-- hand-over's number ('0' without a payload)}.

-- messages_of: worker/lua/payload_messages.lua, loaded before this script.

local kept = 0
local seq = '0'
if ARGV[1] ~= '' then
  local meta = redis.call('HMGET', KEYS[5], 'q', 'd', 'h')
  local last = tonumber(meta[1] or '0')
  local finished = meta[2] and meta[2] == meta[1]
  local same = false
  local old = redis.call('GET', KEYS[1])
  if not old and finished and meta[3] then
    -- The release dropped the finished list and kept its digest.
    local now = messages_of(ARGV[1])
    same = now ~= nil and redis.sha1hex(now) == meta[3]
  elseif old then
    local before, now = messages_of(old), messages_of(ARGV[1])
    local extends = before ~= nil and now ~= nil
      and (before == '' or string.sub(now, 1, string.len(before)) == before)
    same = extends and string.len(now) == string.len(before)
    if not extends and not finished then
      if redis.call('LLEN', KEYS[6]) >= tonumber(ARGV[11]) then return -1 end
      redis.call('RPUSH', KEYS[6], string.format('%.0f', last) .. ':' .. old)
      redis.call('PEXPIRE', KEYS[6], ARGV[2])
      kept = 1
    end
  end
  local time = redis.call('TIME')
  seq = string.format('%.0f',
    math.max(tonumber(time[1]) * 1000000 + tonumber(time[2]), last + 1))
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('HDEL', KEYS[5], 'h')  -- stands for a dropped list only
  -- The same list again (a retried hand-over) stays finished.
  redis.call('HSET', KEYS[5], 'q', seq, 'd', (same and finished) and seq or '0')
  if not (same and finished) then
    redis.call('HSETNX', KEYS[5], 'n', seq)
    redis.call('ZADD', KEYS[8], 'NX', string.sub(seq, 1, -4), ARGV[9])
  end
  redis.call('PEXPIRE', KEYS[5], ARGV[2])
  redis.call('SADD', KEYS[7], ARGV[12])
  redis.call('PEXPIRE', KEYS[7], ARGV[2])
else
  local meta = redis.call('HMGET', KEYS[5], 'q', 'd')
  if meta[1] and meta[1] ~= meta[2] then
    local time = redis.call('TIME')
    redis.call('ZADD', KEYS[8], 'NX', time[1] .. string.sub(time[2] + 1000000, 2, 4), ARGV[9])
  end
end
redis.call('ZADD', KEYS[4], ARGV[10], ARGV[9])
local queued = redis.call('GET', KEYS[2])
if queued and redis.call('EXISTS', ARGV[7] .. queued) == 1
   and redis.call('EXISTS', ARGV[8] .. queued) == 0 then
  return {false, kept, seq}
end
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[6])
redis.call('SET', ARGV[7] .. ARGV[3], ARGV[4], 'PX', ARGV[6])
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[3])
return {ARGV[3], kept, seq}
