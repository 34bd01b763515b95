-- Drop a hand-over written under a session id alone, by a client older than
-- (user, session) keys (worker.protocol.queue.adopt_legacy), once its lists have
-- been handed over again under the pair's keys; only if no hand-over replaced the
-- legacy list meanwhile (that one queued its own legacy job, which adopts it).
-- KEYS[1]  the legacy latest list (memfleet:handover:<session id>)
-- KEYS[2]  the legacy meta (memfleet:handover-meta:<session id>)
-- KEYS[3]  the legacy backlog (memfleet:backlog:<session id>)
-- KEYS[4]  the legacy queued marker (memfleet:queued:<session id>)
-- ARGV[1]  the legacy list as adopt_legacy read it
-- Returns how many of the keys were deleted (0: the list changed; nothing dropped).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
end
return 0
