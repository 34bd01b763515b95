-- The hand-over (worker.queue.enqueue): store the session's latest message
-- list, keep an older list the new one does not extend, and queue one job for
-- the session unless one is already waiting.
--
-- The latest list and its facts (the meta hash: n messages, c its last prefix
-- digest, q its hand-over number, d the number of the list a commit finished)
-- are replaced when the new list extends the old one: the new list's digest
-- at the old length equals the old last digest. Otherwise, unless a commit
-- already finished the old list, the old list goes to the backlog with its
-- number, so the messages only it holds are still processed, in order, before
-- the new ones (the chat server summarised or replaced its history). A full
-- backlog refuses the hand-over (-1): nothing is dropped without a word.
-- Hand-over numbers come from the server clock and never go backwards.
--
-- A job a worker has picked (ARQ's in-progress key) is not waiting: if that
-- worker died before claiming the session, coalescing into its job would
-- stall the session until ARQ's in-progress key expires.
-- The session is (re)listed in the pending set with a deadline: if no job has
-- claimed it by then, the recovery pass looks at it again (a worker may have
-- died between picking its job and claiming the session).
-- KEYS: payload, queued marker, queue, pending set, meta, backlog.
-- ARGV: payload or "", payload ttl ms, job id, job bytes, score, job expiry
-- ms, ARQ's job key prefix, ARQ's in-progress key prefix, session id, pending
-- deadline ms, prefix digests, digest length, backlog limit.
-- Returns {the new job's id, or false when a waiting job will read the
-- payload; 1 when the previous list went to the backlog, else 0}.
local kept = 0
if ARGV[1] ~= '' then
  local width = tonumber(ARGV[12])
  local digests = ARGV[11]
  local count = math.floor(string.len(digests) / width)
  local meta = redis.call('HMGET', KEYS[5], 'n', 'c', 'q', 'd')
  local last = tonumber(meta[3] or '0')
  local old = redis.call('GET', KEYS[1])
  local n = tonumber(meta[1] or '-1')
  local finished = meta[4] and meta[4] == meta[3]
  local extends = false
  if old then
    extends = n == 0 or (n > 0 and n <= count
      and string.sub(digests, (n - 1) * width + 1, n * width) == meta[2])
    if not extends and not finished then
      if redis.call('LLEN', KEYS[6]) >= tonumber(ARGV[13]) then return -1 end
      redis.call('RPUSH', KEYS[6], string.format('%.0f', last) .. ':' .. old)
      redis.call('PEXPIRE', KEYS[6], ARGV[2])
      kept = 1
    end
  end
  local now = redis.call('TIME')
  local seq = math.max(tonumber(now[1]) * 1000000 + tonumber(now[2]), last + 1)
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('DEL', KEYS[5])
  redis.call('HSET', KEYS[5], 'n', count, 'q', string.format('%.0f', seq),
             'c', count > 0 and string.sub(digests, (count - 1) * width + 1) or '')
  if extends and finished and n == count then
    -- The same list again (a retried hand-over): still finished.
    redis.call('HSET', KEYS[5], 'd', string.format('%.0f', seq))
  end
  redis.call('PEXPIRE', KEYS[5], ARGV[2])
end
redis.call('ZADD', KEYS[4], ARGV[10], ARGV[9])
local queued = redis.call('GET', KEYS[2])
if queued and redis.call('EXISTS', ARGV[7] .. queued) == 1
   and redis.call('EXISTS', ARGV[8] .. queued) == 0 then
  return {false, kept}
end
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[6])
redis.call('SET', ARGV[7] .. ARGV[3], ARGV[4], 'PX', ARGV[6])
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[3])
return {ARGV[3], kept}
