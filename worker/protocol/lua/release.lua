-- At a job's end (worker.protocol.lock.SessionLock.release): settle the session's
-- lists in the same round trip, then release the session lock, only while it
-- still holds this job's token; the session leaves the claimed set with it.
-- Settling drops the backlog lists a commit finished, oldest first, and marks
-- the latest list finished if it is still the one the run finished, so the
-- next hand-over need not keep it. Both are facts of the committed cursor, so
-- they hold whoever has the lock now.
-- Settling also keeps the fleet's waiting set (worker.fleet.probe) true: a session
-- with every list finished, or given up (a dead letter), leaves it; otherwise
-- its score becomes the time of its oldest list still unfinished: the backlog's
-- head, else the first hand-over made after this job's claim (the meta's n),
-- else the latest list. And it publishes the commit on the events stream, with
-- no personal data: the session's keyed stand-in, the hand-over number the
-- commit finished, the older lists still waiting, the outcome and its counts.
-- A latest list finished with no older list left is the whole session done: its
-- message snapshot is dropped, and the meta keeps the SHA-1 of its messages (h)
-- in its place, for the one thing the next hand-over would have compared it
-- for: the same list again (a retried hand-over) stays finished
-- (worker/protocol/lua/enqueue.lua). Nothing else needs a finished list: a later list
-- that does not extend it is not kept either way, and the cursor in
-- PostgreSQL, not the snapshot, says where the next list's new messages begin.
-- The byte and session budgets (worker/protocol/lua/enqueue.lua) get back what is
-- dropped: the meta's k (the backlog's bytes) loses each dropped entry's
-- length and goes with the last one, and a session left with no unfinished
-- list leaves the user's active set.
--
-- KEYS[1]  the session's lock (memory-task-lock:{<user>}:<session id>)
-- KEYS[2]  the claimed set (memfleet:claimed:<queue>)
-- KEYS[3]  the session's backlog (memfleet:backlog:...)
-- KEYS[4]  its meta (memfleet:handover-meta:...)
-- KEYS[5]  the waiting set (memfleet:waiting:<queue>)
-- KEYS[6]  the events stream (memfleet:events:<queue>)
-- KEYS[7]  the session's latest list (memfleet:handover:...)
-- KEYS[8]  the user's active set (memfleet:active:{<user>})
-- ARGV[1]  the job's lock token
-- ARGV[2]  the session key ({<user>}:<session id>)
-- ARGV[3]  drop the older lists numbered up to this (0: none)
-- ARGV[4]  the latest list's number when the run finished it (0: it did not)
-- ARGV[5]  1 when the job gave the session up (a dead letter), else 0
-- ARGV[6]  the session's stand-in (the event's session)
-- ARGV[7]  the outcome
-- ARGV[8]  facts added
-- ARGV[9]  facts updated
-- ARGV[10] facts deleted
-- ARGV[11] the stream's approximate length cap
-- ARGV[12] the session id
-- Returns 1 when this job's lock was released, 0 when the lock was not its own.

-- messages_of: worker/protocol/lua/payload_messages.lua, loaded before this script.

local through = tonumber(ARGV[3])
local latest_done = ARGV[4]
local dropped = 0
while through > 0 do
  local head = redis.call('LINDEX', KEYS[3], 0)
  if not head or tonumber(string.match(head, '^(%d+):') or '0') > through then break end
  redis.call('LPOP', KEYS[3])
  dropped = dropped + string.len(head)
end
if redis.call('LLEN', KEYS[3]) == 0 then
  redis.call('HDEL', KEYS[4], 'k')
elseif dropped > 0 and redis.call('HEXISTS', KEYS[4], 'k') == 1 then
  redis.call('HINCRBY', KEYS[4], 'k', -dropped)
end
local settled = through > 0 or latest_done ~= '0'
local meta = redis.call('HMGET', KEYS[4], 'q', 'n')
if latest_done ~= '0' and meta[1] == latest_done then
  redis.call('HSET', KEYS[4], 'd', latest_done)
  redis.call('ZREM', KEYS[5], ARGV[2])
  local payload = redis.call('LLEN', KEYS[3]) == 0 and redis.call('GET', KEYS[7])
  local messages = payload and messages_of(payload)
  if messages then
    redis.call('HSET', KEYS[4], 'h', redis.sha1hex(messages))
    redis.call('DEL', KEYS[7])
  end
elseif ARGV[5] == '1' then
  redis.call('ZREM', KEYS[5], ARGV[2])
elseif settled then
  local head = redis.call('LINDEX', KEYS[3], 0)
  local oldest = (head and string.match(head, '^(%d+):')) or meta[2] or meta[1]
  if oldest then
    redis.call('ZADD', KEYS[5], 'XX', string.format('%.0f', math.floor(tonumber(oldest) / 1000)),
               ARGV[2])
  end
end
if settled and redis.call('EXISTS', KEYS[3]) == 0 then
  local qd = redis.call('HMGET', KEYS[4], 'q', 'd')
  if qd[1] == qd[2] then redis.call('SREM', KEYS[8], ARGV[12]) end
end
if settled then
  local time = redis.call('TIME')
  local finished = latest_done ~= '0' and latest_done or ARGV[3]
  redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[11], '*',
             'session', ARGV[6], 'handover', finished,
             'older_lists', redis.call('LLEN', KEYS[3]), 'outcome', ARGV[7],
             'added', ARGV[8], 'updated', ARGV[9], 'deleted', ARGV[10],
             'at', string.format('%.0f', tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)))
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('ZREM', KEYS[2], ARGV[2])
  return redis.call('DEL', KEYS[1])
end
return 0
