-- Take back a turn of the chat stand-in whose hand-over was refused (api_stub.chat_log):
-- the last occurrence of each of its two messages, as appended.
-- KEYS[1]  chat:session:{<user>}:<session id>, the session's list
-- ARGV[1]  the user's message (JSON)
-- ARGV[2]  the answer (JSON)
-- Returns how many copies of the user's message went (0 or 1).
redis.call('LREM', KEYS[1], -1, ARGV[2])
return redis.call('LREM', KEYS[1], -1, ARGV[1])
