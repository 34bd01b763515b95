"""How the fleet protects the model endpoint, and itself from it, in one room.

A model call passes, from the outside in:

- the fleet's circuit breaker (``breaker``): after a call fails past its retries, no
  job of any replica calls the model for a while; the check rides on the job's claim
  (worker/protocol/lua/claim.lua), the trip and reset are here;
- the fleet's model budget (``budget``): requests, tokens and calls in flight per
  endpoint, shared in Redis by every replica (worker/protocol/lua/budget_*.lua);
- the call's HTTP retries (``retry``): 429, 5xx, timeouts and connection failures,
  backed off, Retry-After honoured, each attempt through the budget;
- the CPU deadline of work on user text in this process (``cpu_budget``: the offline
  rules provider's);
- and once the job fails, what happens to it (``retry_policy``): retried later, deferred
  without spending a try, or given up, by the failure's kind.

The providers (worker.providers) and the job (worker.fleet.job) use these; the Redis
side of the breaker and the budget is protocol (worker.protocol.keys, its Lua).
"""
