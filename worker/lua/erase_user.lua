-- An erase's Redis half (worker.queue.erase_user): delete every hand-over of
-- the user (latest lists, their meta, older lists, queued markers) and the
-- user's session set, and read the Redis clock in the same step. Every
-- hand-over made before this script has a number at or below that clock
-- (worker/lua/enqueue.lua numbers hand-overs from it), so the number is the
-- fence PostgreSQL keeps against commits of such hand-overs.
-- KEYS: the user's session set. ARGV: the user's hash tag ({user}), then the
-- key prefixes: latest list, meta, backlog, queued marker.
-- Returns {the clock in microseconds, the session ids, hand-overs deleted}: the
-- sessions with a list or its meta (an idle session's finished list is dropped,
-- its meta stays: worker/stages/lua/release.lua).
local sessions = redis.call('SMEMBERS', KEYS[1])
local deleted = 0
for _, sid in ipairs(sessions) do
  local suffix = ARGV[1] .. ':' .. sid
  if redis.call('DEL', ARGV[2] .. suffix, ARGV[3] .. suffix) > 0 then
    deleted = deleted + 1
  end
  redis.call('DEL', ARGV[4] .. suffix, ARGV[5] .. suffix)
end
redis.call('DEL', KEYS[1])
local time = redis.call('TIME')
return {string.format('%.0f', tonumber(time[1]) * 1000000 + tonumber(time[2])), sessions,
        deleted}
