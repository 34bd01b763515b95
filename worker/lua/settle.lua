-- After a run (worker.queue.settle): drop the backlog lists a commit covers,
-- oldest first, and mark the latest list finished if it is still the one the
-- run finished, so the next hand-over need not keep it in the backlog.
-- KEYS: backlog, meta. ARGV: drop lists numbered up to this, the latest
-- list's number when the run finished it (0: it did not).
local through = tonumber(ARGV[1])
while true do
  local head = redis.call('LINDEX', KEYS[1], 0)
  if not head then break end
  if tonumber(string.match(head, '^(%d+):') or '0') > through then break end
  redis.call('LPOP', KEYS[1])
end
if ARGV[2] ~= '0' and redis.call('HGET', KEYS[2], 'q') == ARGV[2] then
  redis.call('HSET', KEYS[2], 'd', ARGV[2])
end
return 0
