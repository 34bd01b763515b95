-- Shared by the scripts that compare message lists (worker/protocol/lua/enqueue.lua,
-- worker/protocol/lua/release.lua): worker.protocol.scripts.LuaScript puts this
-- file before each of them, so both read a payload the same way. Not a script
-- of its own: it defines messages_of(payload) and touches no key.
--
-- KEYS: none
-- ARGV: none
-- Returns nothing.

-- The inside of a payload's "messages" array, as worker.protocol.payload writes it.
-- Quotes inside strings are escaped in JSON, so neither marker can come from
-- an id or a message.
local function messages_of(payload)
  local first = string.find(payload, '"messages":[', 1, true)
  local last = first and string.find(payload, '],"handed_over_at":', first, true)
  if not last then return nil end
  return string.sub(payload, first + 12, last - 1)
end

