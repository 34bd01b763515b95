-- The hand-over (worker.protocol.queue.enqueue): store the session's latest message
-- list, keep an older list the new one does not extend, and queue one job for
-- the session unless one is already waiting.
--
-- The latest list is replaced when the new list extends it: the JSON of its
-- messages (the payload's "messages" array, as worker.protocol.payload writes it) is a
-- prefix of the new list's. Otherwise, unless a commit already finished the
-- old list (the meta hash: q its hand-over number, d the number of the list a
-- commit finished), the old list goes to the backlog with its number, so the
-- messages only it holds are still processed, in order, before the new ones
-- (the chat server summarised, edited or replaced its history). A full
-- backlog refuses the hand-over (-1): nothing is dropped without a word.
-- Hand-over numbers come from the server clock and never go backwards.
-- A finished latest list may be gone, the SHA-1 of its messages in the meta's
-- h instead (worker/protocol/lua/release.lua): all a new list asks of it then is
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
-- set (worker.fleet.probe), scored by its oldest such hand-over's time in ms; the
-- meta's n keeps the first hand-over since a job last claimed the session
-- (worker/protocol/lua/release.lua rescores from it). A queued job with no
-- payload (a re-drive) lists a session that still has an unfinished list.
-- Byte budgets, kept here so that every client (any language) is held to
-- them: a payload longer than the hand-over limit is refused ({-4, its
-- bytes}); so is one that would put the session's lists over the session
-- limit ({-2, the bytes it would hold}): the latest list plus the backlog's
-- entries, counted in string bytes (the payload is UTF-8 JSON). The backlog's
-- bytes are kept in the meta's k (worker/protocol/lua/release.lua takes off
-- what it drops), read only while the backlog holds something, so a backlog
-- dropped elsewhere leaves no stale count.
-- A user may have at most the user limit of sessions holding an unfinished
-- list at once (the user's active set: its latest list unfinished, meta q ~=
-- d, or an older list in its backlog). A hand-over that would add one more is
-- refused ({-3, the limit}). The release takes a session out of the set when
-- it finishes its last list; at the limit, members that no longer hold an
-- unfinished list (expired, erased) are pruned first.
-- Every refusal comes before any write: nothing held is replaced or lost.
-- The user's job index (KEYS[10], when given) lists every job queued here for
-- the user, so that an erase finds the user's jobs without reading the queue:
-- also one a worker started and ARQ queued again after a failed try (same id,
-- no queued marker). Each job is scored by its job key's expiry (Redis clock,
-- ms); a job leaves once its key is gone: past its expiry, or found ended
-- among the few earliest entries each time a job is added (so the index holds
-- about the user's live jobs, at O(1) per hand-over). A re-drive (no payload)
-- also lists the session in the user's session set, so that the erase finds
-- its pending and waiting entries there.
--
-- KEYS[1]  the session's latest list (memfleet:handover:{<user>}:<session id>)
-- KEYS[2]  its queued marker (memfleet:queued:...)
-- KEYS[3]  the queue (<queue>, ARQ's sorted set)
-- KEYS[4]  the pending set (memfleet:pending:<queue>)
-- KEYS[5]  the session's meta (memfleet:handover-meta:...)
-- KEYS[6]  its backlog (memfleet:backlog:...)
-- KEYS[7]  the user's session set (memfleet:sessions:{<user>})
-- KEYS[8]  the waiting set (memfleet:waiting:<queue>)
-- KEYS[9]  the user's active set (memfleet:active:{<user>})
-- KEYS[10] optional: the user's job index (memfleet:jobs:{<user>}); absent (a
--          caller of the release before it), the job is not indexed
-- ARGV[1]  the payload, or "" to queue a job only
-- ARGV[2]  the payload's TTL (ms)
-- ARGV[3]  the new job's id
-- ARGV[4]  the new job's bytes (ARQ's job JSON)
-- ARGV[5]  the new job's score: when it is due (ms)
-- ARGV[6]  the job's expiry (ms)
-- ARGV[7]  ARQ's job key prefix (arq:job:)
-- ARGV[8]  ARQ's in-progress key prefix (arq:in-progress:)
-- ARGV[9]  the session key ({<user>}:<session id>), as the sets name it
-- ARGV[10] the pending deadline (ms)
-- ARGV[11] the most older lists a backlog holds
-- ARGV[12] the session id
-- ARGV[13] the hand-over bytes limit
-- ARGV[14] the session bytes limit
-- ARGV[15] the user sessions limit
-- ARGV[16] the user's prefix of a session's meta key (through the hash tag and ':')
-- ARGV[17] the user's prefix of a session's backlog key (likewise)
-- ARGV[18] optional, only while a shard is added (worker.protocol.shards) and only
--          for a user it moves: 'stay' (the new shard is pending) refuses the
--          hand-over ({-5, 0}) if the user is marked moved; 'hold' (joining) also
--          marks the user moved and refuses when no session of the user holds an
--          unfinished list here. Refused, the caller hands over on the new shard.
--          Absent: the hand-over as it always was.
-- ARGV[19] with ARGV[18]: the user's moved marker (memfleet:moved:{<user>})
-- ARGV[20] with ARGV[18]: the marker's TTL (ms)
-- Returns {the new job's id, or false when a waiting job will read the
-- payload; 1 when the previous list went to the backlog, else 0; the
-- hand-over's number ('0' without a payload)}, or -1 when the backlog holds
-- the most lists, or {-2|-3|-4|-5, figure} as above.

-- messages_of: worker/protocol/lua/payload_messages.lua, loaded before this script.

-- Whether a session still holds a list no commit has finished.
local function unfinished(meta_key, backlog_key)
  if redis.call('EXISTS', backlog_key) == 1 then return true end
  local qd = redis.call('HMGET', meta_key, 'q', 'd')
  return qd[1] ~= false and qd[1] ~= qd[2]
end

if ARGV[18] == 'stay' or ARGV[18] == 'hold' then
  if redis.call('EXISTS', ARGV[19]) == 1 then return {-5, 0} end
  if ARGV[18] == 'hold' then
    local busy = false
    for _, sid in ipairs(redis.call('SMEMBERS', KEYS[9])) do
      if unfinished(ARGV[16] .. sid, ARGV[17] .. sid) then busy = true break end
    end
    if not busy then
      redis.call('SET', ARGV[19], '1', 'PX', ARGV[20])
      return {-5, 0}
    end
  end
end

local kept = 0
local seq = '0'
if ARGV[1] ~= '' then
  local size = string.len(ARGV[1])
  if size > tonumber(ARGV[13]) then return {-4, size} end
  local meta = redis.call('HMGET', KEYS[5], 'q', 'd', 'h', 'k')
  local last = tonumber(meta[1] or '0')
  local finished = meta[2] and meta[2] == meta[1]
  local same = false
  local entry = nil
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
      entry = string.format('%.0f', last) .. ':' .. old
    end
  end
  local older = redis.call('LLEN', KEYS[6])
  local older_bytes = older > 0 and tonumber(meta[4] or '0') or 0
  if entry then
    if older >= tonumber(ARGV[11]) then return -1 end
    older_bytes = older_bytes + string.len(entry)
  end
  if older_bytes + size > tonumber(ARGV[14]) then return {-2, older_bytes + size} end
  if not (same and finished) and redis.call('SISMEMBER', KEYS[9], ARGV[12]) == 0 then
    local limit = tonumber(ARGV[15])
    if redis.call('SCARD', KEYS[9]) >= limit then
      for _, sid in ipairs(redis.call('SMEMBERS', KEYS[9])) do
        if not unfinished(ARGV[16] .. sid, ARGV[17] .. sid) then
          redis.call('SREM', KEYS[9], sid)
        end
      end
      if redis.call('SCARD', KEYS[9]) >= limit then return {-3, limit} end
    end
    redis.call('SADD', KEYS[9], ARGV[12])
  end
  if redis.call('EXISTS', KEYS[9]) == 1 then redis.call('PEXPIRE', KEYS[9], ARGV[2]) end
  if entry then
    redis.call('RPUSH', KEYS[6], entry)
    redis.call('PEXPIRE', KEYS[6], ARGV[2])
    redis.call('HSET', KEYS[5], 'k', older_bytes)
    kept = 1
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
  redis.call('SADD', KEYS[7], ARGV[12])
  if redis.call('PTTL', KEYS[7]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[7], ARGV[2])
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
if KEYS[10] then
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[10], '-inf', now)
  for _, id in ipairs(redis.call('ZRANGE', KEYS[10], 0, 2)) do
    if redis.call('EXISTS', ARGV[7] .. id) == 0 then redis.call('ZREM', KEYS[10], id) end
  end
  redis.call('ZADD', KEYS[10], now + tonumber(ARGV[6]), ARGV[3])
  if redis.call('PTTL', KEYS[10]) < tonumber(ARGV[6]) then
    redis.call('PEXPIRE', KEYS[10], ARGV[6])
  end
end
return {ARGV[3], kept, seq}
