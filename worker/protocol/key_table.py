"""The table of every Redis key memfleet uses (``KEYS``): pattern, type, writers,
readers and lifetime, each pattern built from worker.protocol.keys's prefixes.

docs/protocol.md ("Keys") is the same table in prose, for an implementation in
another language; tests/unit/protocol/test_protocol_keys.py keeps the two the same
and checks that every key builder of keys.py makes a key of the table.

Placeholders in a pattern:

- ``<queue>``: the ARQ queue's name (MEMFLEET_QUEUE_NAME; ``keys.DEFAULT_QUEUE``);
- ``{<user>}``: the user's hash tag, the user id escaped inside braces
  (worker.protocol.keys.user_tag), so that one user's keys share a Redis
  Cluster slot;
- ``<session id>``: the session id as the chat server gave it; a session key ends
  in ``{<user>}:<session id>`` (``SessionRef.key``), which is also how sets and
  sorted sets name a session;
- ``<job id>``: an ARQ job id (``memfleet-`` and 32 hex digits for the jobs
  memfleet queues);
- ``<keyed user>``: 32 hex digits of HMAC-SHA-256 over the user id, under
  MEMFLEET_ERASE_FENCE_KEY (worker.api.write_rate): a key that must outlive the
  user's erase names the user so, never by the id;
- ``{<endpoint>}``: a short hash of the queue name and a model endpoint's base URL
  (worker.protection.budget.endpoint_id), in braces: one endpoint's budget keys
  share a slot.

Lua scripts take their keys as KEYS[]; a few also build keys from prefixes passed
in ARGV (a user's session keys, ARQ's job keys, the lock of a session found in a
set), listed in docs/protocol.md ("Keys a script builds").
"""

from __future__ import annotations

from dataclasses import dataclass

from worker.protocol.keys import (
    API_ERASES_PREFIX,
    API_EXPORTS_PREFIX,
    API_FACT_WRITES_PREFIX,
    ARQ_ABORT,
    ARQ_HEALTH_CHECK_SUFFIX,
    ARQ_IN_PROGRESS_PREFIX,
    ARQ_JOB_PREFIX,
    ARQ_RESULT_PREFIX,
    ARQ_RETRY_PREFIX,
    BACKLOG_PREFIX,
    BREAKER_FAILURES_PREFIX,
    BREAKER_OPEN_PREFIX,
    BREAKER_PROBE_PREFIX,
    BUDGET_PREFIX,
    CHAT_SESSION_PREFIX,
    CHAT_SESSIONS_PREFIX,
    CHAT_TURNS_PREFIX,
    CLAIMED_PREFIX,
    EVENTS_PREFIX,
    HANDOVER_PREFIX,
    LOCK_PREFIX,
    META_PREFIX,
    PENDING_PREFIX,
    QUEUED_PREFIX,
    SUSPECTS_PREFIX,
    USER_ACTIVE_PREFIX,
    USER_JOBS_PREFIX,
    USER_MOVED_PREFIX,
    USER_PORTRAIT_PREFIX,
    USER_SESSIONS_PREFIX,
    WAITING_PREFIX,
    WORKERS_PREFIX,
)


@dataclass(frozen=True, slots=True)
class KeySpec:
    pattern: str  # the key, with the placeholders above
    type: str  # its Redis type
    writers: str  # who writes (and deletes) it
    readers: str  # who reads it
    lifetime: str  # how long it lives: its TTL, or what removes it

    @property
    def prefix(self) -> str:
        """The fixed text the key starts with ("" for a key named by the queue)."""
        cut = [i for i in (self.pattern.find("<"), self.pattern.find("{")) if i >= 0]
        return self.pattern[:min(cut)] if cut else self.pattern


_SESSION = "{<user>}:<session id>"
_WEEK = "7 days (PAYLOAD_TTL_MS) after the session's last hand-over"

KEYS: tuple[KeySpec, ...] = (
    # ---- the hand-over: written by chat servers, read by workers
    KeySpec(HANDOVER_PREFIX + _SESSION, "string",
            "enqueue.lua (SET); release.lua (DEL once finished); erase_user.lua",
            "claim.lua, enqueue.lua, release.lua; dead letters (EXISTS)",
            _WEEK + "; gone once a commit finished it with no older list left"),
    KeySpec(META_PREFIX + _SESSION, "hash",
            "enqueue.lua (q, d, n, h, k); claim.lua (n); release.lua (d, h, k); erase_user.lua",
            "enqueue.lua, claim.lua, release.lua, memory_status (q, d), fleet_probe.lua",
            _WEEK + "; outlives a finished list (an idle session keeps only this)"),
    KeySpec(BACKLOG_PREFIX + _SESSION, "list",
            "enqueue.lua (RPUSH); release.lua (LPOP); claim.lua (DEL); erase_user.lua",
            "claim.lua (LRANGE), enqueue.lua, memory_status (LLEN)",
            "7 days after its last push; emptied as commits finish its lists"),
    KeySpec(QUEUED_PREFIX + _SESSION, "string",
            "enqueue.lua (SET: the queued job's id); claim.lua (DEL); erase_user.lua",
            "enqueue.lua, recover.lua",
            "the job's expiry (1 day + defer); gone when its job claims"),
    KeySpec(LOCK_PREFIX + _SESSION, "string",
            "claim.lua (SET NX: a job's token); extend.lua; release.lua (DEL)",
            "extend.lua, release.lua, recover.lua (PTTL)",
            "MEMFLEET_LOCK_TTL_S, extended every third of it while the job runs"),
    KeySpec(USER_SESSIONS_PREFIX + "{<user>}", "set",
            "enqueue.lua (SADD session id); erase_user.lua (DEL)", "erase_user.lua",
            "7 days after the user's last hand-over or re-drive"),
    KeySpec(USER_JOBS_PREFIX + "{<user>}", "zset",
            "enqueue.lua (ZADD job id, the job key's expiry ms; drops expired and ended"
            " jobs); erase_user.lua (ZREM)", "erase_user.lua",
            "the longest job expiry (1 day + defer) after the user's last queued job;"
            " a job leaves once it ended, at a later hand-over or an erase"),
    KeySpec(USER_ACTIVE_PREFIX + "{<user>}", "set",
            "enqueue.lua (SADD, prunes at the cap); release.lua (SREM); erase_user.lua",
            "enqueue.lua (the MEMFLEET_MAX_USER_SESSIONS cap)",
            "7 days after the user's last hand-over; a session leaves when its lists finish"),
    KeySpec(USER_MOVED_PREFIX + "{<user>}", "string",
            "enqueue.lua (SET '1' in hold mode: the user's hand-overs go to the joining"
            " shard now); the erase (DEL)", "enqueue.lua (stay and hold modes)",
            "7 days (PAYLOAD_TTL_MS); only ever on a moving user's old shard"),
    KeySpec(USER_PORTRAIT_PREFIX + "{<user>}", "hash",
            "portrait_note.lua (c: commits since the last refresh); portrait_queue.lua (j: the"
            " queued refresh's job id); portrait_claim.lua (t: the last refresh, ms; c, j);"
            " the erase (DEL)",
            "portrait_note.lua, portrait_queue.lua",
            "7 days (PAYLOAD_TTL_MS) after the user's last commit or refresh"),
    # ---- the fleet, per queue
    KeySpec("<queue>", "zset",
            "enqueue.lua (ZADD job id, due ms); ARQ (ZREM at the end, ZINCRBY on retry);"
            " erase_user.lua; retire_orphans.lua (ZREM)",
            "ARQ workers (start_job.lua), fleet_probe.lua, retire_orphans.lua,"
            " recover.lua (ZSCORE)",
            "no TTL; a job leaves when ARQ finishes it, or the recovery pass retires it"
            " (its worker dead)"),
    KeySpec(PENDING_PREFIX + "<queue>", "zset",
            "enqueue.lua, claim.lua, queue.keep_pending (session key, deadline ms);"
            " recover.lua (ZREM, or a later deadline while its job is on its way),"
            " erase_user.lua (ZREM)", "recover.lua, retire_orphans.lua (ZSCORE)",
            "no TTL; a session leaves when a job takes its lock, or the recovery pass"),
    KeySpec(CLAIMED_PREFIX + "<queue>", "zset",
            "claim.lua, extend.lua (session key, lock expiry ms); release.lua, recover.lua",
            "recover.lua, retire_orphans.lua (ZSCORE)",
            "no TTL; a session leaves at its lock's release or by recovery"),
    KeySpec(WAITING_PREFIX + "<queue>", "zset",
            "enqueue.lua (session key, oldest unfinished hand-over ms); claim.lua,"
            " release.lua, erase_user.lua, fleet_probe.lua", "fleet_probe.lua (the lag)",
            "no TTL; a session leaves when its lists are finished, given up or gone"),
    KeySpec(EVENTS_PREFIX + "<queue>", "stream",
            "release.lua (XADD MAXLEN ~ 100000)",
            "memory_events (XREAD); memfleet webhook (group memfleet-webhook)",
            "no TTL; capped at about 100,000 entries"),
    KeySpec(WORKERS_PREFIX + "<queue>", "hash",
            "heartbeat.lua (worker id -> '<deadline ms>|<job ids>'); the worker at stop;"
            " fleet_probe.lua, retire_orphans.lua, recover.lua (drop lapsed)",
            "fleet_probe.lua, retire_orphans.lua, recover.lua",
            "no TTL; an entry lapses 6 s after its worker's last beat"),
    KeySpec(SUSPECTS_PREFIX + "<queue>", "hash",
            "fleet_probe.lua, retire_orphans.lua (job id -> ms first seen unlisted)",
            "fleet_probe.lua, retire_orphans.lua",
            "no TTL; an entry goes when its job is listed again, ends or is retired"),
    KeySpec(BREAKER_OPEN_PREFIX + "<queue>", "string",
            "breaker_trip.lua (SET PX)", "claim.lua (PTTL), breaker_trip.lua",
            "the open time: base * 2^(failures - 1), capped"),
    KeySpec(BREAKER_FAILURES_PREFIX + "<queue>", "string",
            "breaker_trip.lua (INCR); breaker.reset (DEL)", "claim.lua",
            "1 hour after the last failure (FAILURES_TTL_MS)"),
    KeySpec(BREAKER_PROBE_PREFIX + "<queue>", "string",
            "claim.lua (SET: the probing job's token); breaker_trip.lua, breaker.reset (DEL)",
            "claim.lua", "the lock's TTL"),
    # ---- the model budget, per endpoint
    KeySpec(BUDGET_PREFIX + "{<endpoint>}:log", "zset",
            "budget_acquire.lua ('<ticket>:<tokens>' by grant ms); budget_release.lua",
            "budget_acquire.lua", "the budget window, only ever lengthened"),
    KeySpec(BUDGET_PREFIX + "{<endpoint>}:leases", "zset",
            "budget_acquire.lua (ticket by lease expiry ms); budget_release.lua",
            "budget_acquire.lua", "the lease time, only ever lengthened"),
    KeySpec(BUDGET_PREFIX + "{<endpoint>}:line", "zset",
            "budget_acquire.lua (waiting ticket by arrival ms); budget_release.lua",
            "budget_acquire.lua", "the longest wait + grace"),
    KeySpec(BUDGET_PREFIX + "{<endpoint>}:alive", "zset",
            "budget_acquire.lua (waiting ticket by when it counts as gone); budget_release.lua",
            "budget_acquire.lua", "the longest wait + grace"),
    KeySpec(BUDGET_PREFIX + "{<endpoint>}:asks", "hash",
            "budget_acquire.lua (waiting ticket -> tokens); budget_release.lua",
            "budget_acquire.lua", "the longest wait + grace"),
    KeySpec(BUDGET_PREFIX + "{<endpoint>}:paused-until", "string",
            "budget_pause.lua (pause end, ms on the Redis clock)", "budget_acquire.lua",
            "the pause (a 429's Retry-After, capped)"),
    # ---- ARQ's keys, per job (ARQ writes them; memfleet's scripts too)
    KeySpec(ARQ_JOB_PREFIX + "<job id>", "string",
            "enqueue.lua (SET: the job's JSON); ARQ (DEL at the end); erase_user.lua;"
            " retire_orphans.lua (DEL)",
            "ARQ workers, enqueue.lua (EXISTS), retire_orphans.lua, recover.lua (EXISTS)",
            "1 day + defer (JOB_EXPIRES_MS); gone at the end"),
    KeySpec(ARQ_IN_PROGRESS_PREFIX + "<job id>", "string",
            "start_job.lua (PSETEX '1'); ARQ (DEL at the end); retire_orphans.lua (DEL)",
            "start_job.lua, enqueue.lua, erase_user.lua, fleet_probe.lua, retire_orphans.lua,"
            " recover.lua",
            "the job timeout + 10 s; gone at the end, or when the recovery pass retires"
            " a dead worker's job"),
    KeySpec(ARQ_RETRY_PREFIX + "<job id>", "string",
            "ARQ (INCR at each try, DEL at the end); erase_user.lua, retire_orphans.lua (DEL)",
            "ARQ workers",
            "88,400 s after the last try"),
    KeySpec(ARQ_RESULT_PREFIX + "<job id>", "string",
            "ARQ, only when MEMFLEET_KEEP_RESULT_S > 0 (default 0: never)", "nobody in memfleet",
            "MEMFLEET_KEEP_RESULT_S"),
    KeySpec(ARQ_ABORT, "zset", "ARQ (ZREM at a job's end; abort is off: never added)",
            "nobody in memfleet", "no TTL; stays empty"),
    KeySpec("<queue>" + ARQ_HEALTH_CHECK_SUFFIX, "string",
            "ARQ workers (every hour: counts of jobs); DEL at stop", "arq --check",
            "1 hour + 1 s"),
    # ---- the memory API (worker.api) and the chat stand-in (api_stub), per user
    KeySpec(API_EXPORTS_PREFIX + "{<user>}", "zset",
            "export_lease_take.lua, export_lease_renew.lua (lease id by expiry ms);"
            " the API (ZREM, DEL at erase)", "export_lease_take.lua, export_lease_renew.lua",
            "the lease time, renewed while a download goes on"),
    KeySpec(API_FACT_WRITES_PREFIX + "{<user>}", "string",
            "fact_write_rate.lua (GCRA's next arrival, ms); the API (DEL at erase)",
            "fact_write_rate.lua", "until the user's bucket is full again"),
    KeySpec(API_ERASES_PREFIX + "<keyed user>", "string",
            "fact_write_rate.lua (GCRA's next arrival, ms); outlives the erase it counts",
            "fact_write_rate.lua", "until the user's bucket is full again"),
    KeySpec(CHAT_SESSION_PREFIX + _SESSION, "list",
            "the chat stand-in (RPUSH message JSON, LTRIM, LREM); its erase",
            "the chat stand-in", "MEMFLEET_CHAT_TTL_S after the session's last turn"),
    KeySpec(CHAT_SESSIONS_PREFIX + "{<user>}", "zset",
            "chat_admit_turn.lua, chat_append_turn.lua (session id by its last turn, ms;"
            " prunes the lapsed); chat_take_back_turn.lua (ZREM a session left empty);"
            " chat_erase_user.lua (DEL)",
            "chat_admit_turn.lua (MEMFLEET_CHAT_SESSIONS_PER_USER), chat_erase_user.lua",
            "MEMFLEET_CHAT_TTL_S after the user's last turn"),
    KeySpec(CHAT_TURNS_PREFIX + "{<user>}", "string",
            "chat_admit_turn.lua (GCRA's next arrival, ms); chat_erase_user.lua (DEL)",
            "chat_admit_turn.lua", "until the user's bucket is full again"),
)

