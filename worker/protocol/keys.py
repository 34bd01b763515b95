"""Every Redis key memfleet uses: the prefixes, the session (``SessionRef``) that
carries its own keys, and the functions that build the keys of a user, a queue,
an endpoint or a job.

No other module spells a key name: the hand-over and the fleet, ARQ's keys that
memfleet reads or writes itself, the model budget, the memory API and the chat
stand-in all take theirs from here (but MEMFLEET_QUEUE_NAME's default in
worker.config, which imports no package: it equals ``DEFAULT_QUEUE``, tested).
worker.protocol.key_table documents each key (``KEYS``: pattern, type, writers,
readers, lifetime, and the placeholders of the patterns); docs/protocol.md is the
same table in prose, for an implementation in another language.

A session is the pair (user_id, session_id): chat products number sessions per
user ("1", "2", ...), so a session id alone names nothing. Every per-session key
ends in ``SessionRef.key``, ``{<user>}:<session id>``: the user escaped inside a
Redis Cluster hash tag (``user_tag``) so that one user's keys share a slot, and
so that the pair reads back without doubt from a key or a set member
(``SessionRef.parse``): the escaped user holds no ``}``, so the first ``}`` ends it.
"""

from __future__ import annotations

from dataclasses import dataclass

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
# The user's portrait refreshes (worker.protocol.portrait_queue), per user.
USER_PORTRAIT_PREFIX = "memfleet:portrait:"
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

# '%' first: it escapes the others.
_ESCAPES = (("%", "%25"), ("{", "%7B"), ("}", "%7D"))


def user_tag(user_id: str) -> str:
    """``{<user>}``: the hash tag every Redis key of the user carries."""
    escaped = user_id
    for raw, code in _ESCAPES:
        escaped = escaped.replace(raw, code)
    return "{" + escaped + "}"


def _unescape(escaped: str) -> str:
    for raw, code in reversed(_ESCAPES):
        escaped = escaped.replace(code, raw)
    return escaped


@dataclass(frozen=True, slots=True)
class SessionRef:
    """A session, and its keys: each ``<prefix>{<user>}:<session id>``."""

    user_id: str
    session_id: str

    @property
    def key(self) -> str:
        """``{<user>}:<session id>``: what every key of the session ends in, and how
        sets and sorted sets name the session."""
        return f"{user_tag(self.user_id)}:{self.session_id}"

    @classmethod
    def parse(cls, key: str) -> SessionRef:
        """The pair back from ``key``; ValueError when it is not one."""
        end = key.find("}")
        if not key.startswith("{") or end < 0 or key[end + 1:end + 2] != ":":
            raise ValueError("not a session key")
        return cls(_unescape(key[1:end]), key[end + 2:])

    @property
    def handover_key(self) -> str:
        """The latest list handed over (a string: the payload)."""
        return HANDOVER_PREFIX + self.key

    @property
    def meta_key(self) -> str:
        """The hand-over's meta (a hash: q, d, n, h, k)."""
        return META_PREFIX + self.key

    @property
    def backlog_key(self) -> str:
        """Older lists not yet finished (a list)."""
        return BACKLOG_PREFIX + self.key

    @property
    def queued_key(self) -> str:
        """The id of the session's queued job that has not started (a string)."""
        return QUEUED_PREFIX + self.key

    @property
    def lock_key(self) -> str:
        """The session lock (a string: the holding job's token)."""
        return LOCK_PREFIX + self.key

    @property
    def state_keys(self) -> tuple[str, str, str, str]:
        """Every key that holds the session's hand-over (what an erase deletes):
        handover_key, meta_key, backlog_key, queued_key; not the lock."""
        return (self.handover_key, self.meta_key, self.backlog_key, self.queued_key)

    @property
    def chat_session_key(self) -> str:
        """The chat stand-in's (api_stub) messages of the session (a list)."""
        return CHAT_SESSION_PREFIX + self.key


# ---------------------------------------------------------------- per user

def user_sessions_key(user_id: str) -> str:
    return USER_SESSIONS_PREFIX + user_tag(user_id)


def user_active_key(user_id: str) -> str:
    return USER_ACTIVE_PREFIX + user_tag(user_id)


def user_moved_key(user_id: str) -> str:
    return USER_MOVED_PREFIX + user_tag(user_id)


def user_jobs_key(user_id: str) -> str:
    return USER_JOBS_PREFIX + user_tag(user_id)


def user_portrait_key(user_id: str) -> str:
    """The user's portrait refresh state (a hash: c, t, j; worker.protocol.portrait_queue)."""
    return USER_PORTRAIT_PREFIX + user_tag(user_id)


def user_keys(user_id: str) -> tuple[str, ...]:
    """The keys of the user as a whole (beside each session's ``state_keys``)."""
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


def chat_sessions_key(user_id: str) -> str:
    return CHAT_SESSIONS_PREFIX + user_tag(user_id)


def chat_turns_key(user_id: str) -> str:
    return CHAT_TURNS_PREFIX + user_tag(user_id)
