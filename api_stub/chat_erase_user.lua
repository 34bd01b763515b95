-- Erase a user's conversations in the chat stand-in (api_stub.chat_log): every session
-- list the user's set names, then the set.
-- KEYS[1]  chat:sessions:{<user>}, the user's session set
-- ARGV[1]  the prefix of the user's session lists, through the hash tag and ':'
--          (chat:session:{<user>}:); a list's key is the prefix and a session id
-- Returns how many session lists went.
local n = 0
for _, sid in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  n = n + redis.call('DEL', ARGV[1] .. sid)
end
redis.call('DEL', KEYS[1])
return n
