-- Erase a user's conversations in the chat stand-in (api_stub.chat_log): every session
-- list the user's session ids name, then the ids and the user's turn rate.
-- KEYS[1]  chat:sessions:{<user>}, the user's session ids (a sorted set by last turn; a
--          set when an older stand-in wrote it)
-- KEYS[2]  chat:turns:{<user>}, the user's turn rate
-- ARGV[1]  the prefix of the user's session lists, through the hash tag and ':'
--          (chat:session:{<user>}:); a list's key is the prefix and a session id
-- Returns how many session lists went.
local ids
if redis.call('TYPE', KEYS[1])['ok'] == 'set' then
  ids = redis.call('SMEMBERS', KEYS[1])
else
  ids = redis.call('ZRANGE', KEYS[1], 0, -1)
end
local n = 0
for _, sid in ipairs(ids) do
  n = n + redis.call('DEL', ARGV[1] .. sid)
end
redis.call('DEL', KEYS[1], KEYS[2])
return n
