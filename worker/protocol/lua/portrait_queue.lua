-- Make sure one refresh of the user's portrait is queued, due at ARGV[3] at the latest
-- (worker.protocol.portrait_queue.note_commit): a refresh already waiting in the queue
-- (its job key there, no in-progress key) takes this commit too, brought forward when
-- it was due later; otherwise a new ARQ job is written, due then. A refresh a worker
-- has started does not count: it may have read the facts before this commit.
-- The new job is listed in the user's job index, so an erase drops it with the
-- user's other queued jobs (worker/protocol/lua/erase_user.lua).
--
-- KEYS[1]  the user's portrait refresh state (memfleet:portrait:{<user>})
-- KEYS[2]  the queue (<queue>, ARQ's sorted set)
-- KEYS[3]  the user's job index (memfleet:jobs:{<user>})
-- ARGV[1]  the new job's id
-- ARGV[2]  the new job's bytes (ARQ's job JSON)
-- ARGV[3]  when the refresh is due (ms)
-- ARGV[4]  the new job's expiry (ms)
-- ARGV[5]  ARQ's job key prefix (arq:job:)
-- ARGV[6]  ARQ's in-progress key prefix (arq:in-progress:)
-- ARGV[7]  the state's TTL (ms)
-- Returns {the job id of the refresh that takes this commit; 1 when it is new, 2 when a
-- waiting one was brought forward, 0 when a waiting one takes it as it is}.
local due = tonumber(ARGV[3])
local queued = redis.call('HGET', KEYS[1], 'j')
if queued and redis.call('EXISTS', ARGV[5] .. queued) == 1
   and redis.call('EXISTS', ARGV[6] .. queued) == 0 then
  local score = redis.call('ZSCORE', KEYS[2], queued)
  if score then
    if due < tonumber(score) then
      redis.call('ZADD', KEYS[2], 'XX', ARGV[3], queued)
      return {queued, 2}
    end
    return {queued, 0}
  end
end
redis.call('SET', ARGV[5] .. ARGV[1], ARGV[2], 'PX', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[1], 'j', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[4]), ARGV[1])
if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[4]) then
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
end
return {ARGV[1], 1}
