"""Every Redis key memfleet uses: the prefixes, and the functions that build the keys.

No other module spells a key name: the hand-over and the fleet, ARQ's keys that
memfleet reads or writes itself, the model budget, the memory API and the chat
stand-in all take theirs from here (but MEMFLEET_QUEUE_NAME's default in
worker.config, which imports no package: it equals ``DEFAULT_QUEUE``, tested).
worker.protocol.key_table documents each key (``KEYS``: pattern, type, writers,
readers, lifetime, and the placeholders of the patterns); docs/protocol.md is the
same table in prose, for an implementation in another language.
"""

from __future__ import annotations

from worker.protocol.session_ref import SessionRef, user_tag

DEFAULT_QUEUE = "memfleet:queue"  # ARQ's queue, a sorted set; MEMFLEET_QUEUE_NAME
# `memfleet eval`'s throwaway queues (+ a run's id): no fleet worker listens on them.
EVAL_QUEUE_PREFIX = "memfleet:eval:"

# The hand-over, per session (+ {<user>}:<session id>) and per user (+ {<user>}).
HANDOVER_PREFIX = "memfleet:handover:"
META_PREFIX = "memfleet:handover-meta:"
BACKLOG_PREFIX = "memfleet:backlog:"
QUEUED_PREFIX = "memfleet:queued:"
LOCK_PREFIX = "memory-task-lock:"
USER_SESSIONS_PREFIX = "memfleet:sessions:"
USER_ACTIVE_PREFIX = "memfleet:active:"
USER_JOBS_PREFIX = "memfleet:jobs:"
# While a shard is added (worker.protocol.shards), on a moving user's old shard.
USER_MOVED_PREFIX = "memfleet:moved:"
# The fleet, per queue (+ <queue>).
PENDING_PREFIX = "memfleet:pending:"
CLAIMED_PREFIX = "memfleet:claimed:"
WAITING_PREFIX = "memfleet:waiting:"
EVENTS_PREFIX = "memfleet:events:"
WORKERS_PREFIX = "memfleet:workers:"
SUSPECTS_PREFIX = "memfleet:orphan-suspects:"
BREAKER_OPEN_PREFIX = "memfleet:llm-breaker:open:"
BREAKER_FAILURES_PREFIX = "memfleet:llm-breaker:failures:"
BREAKER_PROBE_PREFIX = "memfleet:llm-breaker:probe:"
# The model budget, per endpoint (+ {<endpoint>}:<part>).
BUDGET_PREFIX = "memfleet:llm-budget:"
BUDGET_PARTS = ("log", "leases", "line", "alive", "asks", "paused-until")
# ARQ's own (arq.constants, arq 0.28; tests/unit/protocol/test_protocol_keys.py compares).
ARQ_JOB_PREFIX = "arq:job:"
ARQ_IN_PROGRESS_PREFIX = "arq:in-progress:"
ARQ_RETRY_PREFIX = "arq:retry:"
ARQ_RESULT_PREFIX = "arq:result:"
ARQ_ABORT = "arq:abort"
ARQ_HEALTH_CHECK_SUFFIX = ":health-check"
# The memory API (worker.api) and the chat stand-in (api_stub), per user.
API_EXPORTS_PREFIX = "memfleet:api-exports:"
API_FACT_WRITES_PREFIX = "memfleet:api-fact-writes:"
API_ERASES_PREFIX = "memfleet:api-erases:"
CHAT_SESSION_PREFIX = "chat:session:"
CHAT_SESSIONS_PREFIX = "chat:sessions:"
CHAT_TURNS_PREFIX = "chat:turns:"

# ---------------------------------------------------------------- per session

def handover_key(session: SessionRef) -> str:
    return HANDOVER_PREFIX + session.key


def meta_key(session: SessionRef) -> str:
    return META_PREFIX + session.key


def backlog_key(session: SessionRef) -> str:
    return BACKLOG_PREFIX + session.key


def queued_key(session: SessionRef) -> str:
    return QUEUED_PREFIX + session.key


def lock_key(session: SessionRef) -> str:
    return LOCK_PREFIX + session.key


def session_keys(session: SessionRef) -> tuple[str, ...]:
    """Every key that holds the session's hand-over (for an erase)."""
    return (handover_key(session), meta_key(session), backlog_key(session),
            queued_key(session))


# ---------------------------------------------------------------- per user

def user_sessions_key(user_id: str) -> str:
    return USER_SESSIONS_PREFIX + user_tag(user_id)


def user_active_key(user_id: str) -> str:
    return USER_ACTIVE_PREFIX + user_tag(user_id)


def user_moved_key(user_id: str) -> str:
    return USER_MOVED_PREFIX + user_tag(user_id)


def user_jobs_key(user_id: str) -> str:
    return USER_JOBS_PREFIX + user_tag(user_id)


def user_keys(user_id: str) -> tuple[str, ...]:
    """The keys of the user as a whole (beside each session's session_keys)."""
    return (user_sessions_key(user_id), user_active_key(user_id), user_jobs_key(user_id))


def user_session_prefix(prefix: str, user_id: str) -> str:
    """``prefix`` through the user's hash tag and ':': with a session id appended,
    that session's key (the scripts that walk a user's sessions take these)."""
    return prefix + user_tag(user_id) + ":"


# ---------------------------------------------------------------- per queue

def pending_key(queue_name: str) -> str:
    return PENDING_PREFIX + queue_name


def claimed_key(queue_name: str) -> str:
    return CLAIMED_PREFIX + queue_name


def waiting_key(queue_name: str) -> str:
    return WAITING_PREFIX + queue_name


def events_key(queue_name: str) -> str:
    return EVENTS_PREFIX + queue_name


def workers_key(queue_name: str) -> str:
    return WORKERS_PREFIX + queue_name


def suspects_key(queue_name: str) -> str:
    return SUSPECTS_PREFIX + queue_name


def breaker_open_key(queue_name: str) -> str:
    return BREAKER_OPEN_PREFIX + queue_name


def breaker_failures_key(queue_name: str) -> str:
    return BREAKER_FAILURES_PREFIX + queue_name


def breaker_probe_key(queue_name: str) -> str:
    return BREAKER_PROBE_PREFIX + queue_name


def eval_queue(run: str) -> str:
    """The queue one `memfleet eval` run hands its scenarios over to."""
    return EVAL_QUEUE_PREFIX + run


def queue_keys(queue_name: str) -> tuple[str, ...]:
    """Every key of a queue itself (not its jobs' or sessions'): what is left of a
    throwaway queue (`memfleet eval`'s) once its jobs are done and its users erased."""
    return (queue_name, pending_key(queue_name), claimed_key(queue_name),
            waiting_key(queue_name), events_key(queue_name), workers_key(queue_name),
            suspects_key(queue_name), breaker_open_key(queue_name),
            breaker_failures_key(queue_name), breaker_probe_key(queue_name),
            queue_name + ARQ_HEALTH_CHECK_SUFFIX)


# ---------------------------------------------------------------- others

def budget_key(endpoint: str, part: str) -> str:
    """One of an endpoint's budget keys (``part`` one of BUDGET_PARTS)."""
    return f"{BUDGET_PREFIX}{{{endpoint}}}:{part}"


def arq_job_key(job_id: str) -> str:
    return ARQ_JOB_PREFIX + job_id


def arq_in_progress_key(job_id: str) -> str:
    return ARQ_IN_PROGRESS_PREFIX + job_id


def arq_retry_key(job_id: str) -> str:
    return ARQ_RETRY_PREFIX + job_id


def api_exports_key(user_id: str) -> str:
    return API_EXPORTS_PREFIX + user_tag(user_id)


def api_fact_writes_key(user_id: str) -> str:
    return API_FACT_WRITES_PREFIX + user_tag(user_id)


def api_erases_key(keyed_user: str) -> str:
    """``keyed_user``: the user's keyed hash (worker.api.write_rate), never the id."""
    return API_ERASES_PREFIX + keyed_user


def chat_session_key(session: SessionRef) -> str:
    return CHAT_SESSION_PREFIX + session.key


def chat_sessions_key(user_id: str) -> str:
    return CHAT_SESSIONS_PREFIX + user_tag(user_id)


def chat_turns_key(user_id: str) -> str:
    return CHAT_TURNS_PREFIX + user_tag(user_id)
