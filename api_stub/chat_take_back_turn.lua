-- Take back a turn of the chat stand-in whose hand-over was refused (api_stub.chat_log):
-- the last occurrence of each of its two messages, as appended. A session left without
-- a message no longer counts against the user's cap on sessions (chat_admit_turn.lua).
-- KEYS[1]  chat:session:{<user>}:<session id>, the session's list
-- KEYS[2]  chat:sessions:{<user>}, the user's session ids by their last turn (ms)
-- ARGV[1]  the user's message (JSON)
-- ARGV[2]  the answer (JSON)
-- ARGV[3]  the session id
-- Returns how many copies of the user's message went (0 or 1).
redis.call('LREM', KEYS[1], -1, ARGV[2])
local n = redis.call('LREM', KEYS[1], -1, ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZREM', KEYS[2], ARGV[3])
end
return n
