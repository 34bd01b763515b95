-- A commit changed the user's facts (worker.protocol.portrait_queue.note_commit): count
-- it toward the user's next portrait refresh and say when the last one started, so
-- the caller can work out when the next is due (portrait_queue.refresh_due_ms).
--
-- KEYS[1]  the user's portrait refresh state (memfleet:portrait:{<user>})
-- ARGV[1]  the state's TTL (ms)
-- Returns {the commits since the last refresh, this one included; when the last
-- refresh started (ms, Redis clock), or -1 when none is known; now (ms, Redis clock)}.
local commits = redis.call('HINCRBY', KEYS[1], 'c', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
local last = redis.call('HGET', KEYS[1], 't')
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
return {commits, last and tonumber(last) or -1, now}
