"""memfleet's exceptions: one root, translated from lower layers at the edge.

    MemfleetError
    ├── InvalidHandover        the caller's session/user/messages break the contract
    │   └── HandoverTooLarge       a message or the hand-over is over its byte limit
    ├── HandoverUnavailable    Redis could not take the hand-over (outage, timeout)   transient
    │   ├── HandoverBacklogFull    the session's older lists wait unprocessed         transient
    │   │   └── SessionBytesFull       ... and fill the session's byte budget         transient
    │   └── UserSessionsFull       the user's sessions with unfinished lists: at cap  transient
    ├── InvalidJob             a job or its payload in Redis cannot be read
    ├── LockLost               the session lock expired or was taken while the job ran
    ├── StoreError             PostgreSQL failed (connection, query)                    transient
    │   └── StoreUnavailable       PostgreSQL cannot be reached or is shutting down       transient
    ├── StoreConflict          a compare-and-set in the persist transaction lost
    │   ├── CursorFenced           another run already committed this slice
    │   ├── UserVersionConflict    another job changed this user's facts first          transient
    │   ├── MemoryOptedOut         the user turned memory off while the run worked
    │   └── UserErased             the user was erased after the run's hand-over was made
    ├── ConsolidationContention other jobs of the user kept committing first             transient
    ├── ModelBudgetBusy        the fleet's model budget had no slot within the wait      transient
    ├── ProviderError          an LLM or embeddings call was refused (HTTP 400 and the like)
    │   ├── ProviderUnavailable    rate limit, 5xx, timeout, connection                  transient
    │   ├── ProviderAnswerInvalid  the answer broke the schema or named unknown ids      transient
    │   │   └── OfflineAnswerInvalid   the offline provider's own answer broke the wire
    │   └── ProviderWorkOverBudget the provider's CPU work on a slice overran its budget
    ├── ConfigurationError     settings that cannot work (missing key, unknown model)
    ├── UnexpectedJobError     what the job hands ARQ for an error memfleet did not expect
    └── MemoryApiError         HTTP only (worker.client.memory_api): a call refused
        ├── AccessDenied           401/403: no, a refused or an out-of-scope credential
        ├── NotFound               404: no such fact or held proposal for this user
        ├── WriteConflict          409: the fact or proposal changed since it was read
        │   └── MemoryOff              an add asked with if_memory_on: memory is off
        ├── InvalidRequest         400/413/422 on a route other than the hand-over
        ├── RateLimited            429: the user's writes, erases or exports  transient
        ├── MemoryApiUnavailable   no answer, or a 5xx, off the hand-over     transient
        └── LongPollRefused        a wait or an event stream refused for now  transient
            ├── TooManyLongPolls       the caller holds its share of them (429)
            └── LongPollsFull          the API process holds its fill (503)

``transient`` is the retry policy: the job runs again later (cursor untouched)
only for an error that can heal by itself. Everything else ends the run at
once, on the record. ``outage`` marks the errors of a server being down: they
outlast the tries too, since a session must not be given up because the
database was away longer than a job's backoff (worker.fleet.job_outcome). Lower-level
errors (asyncpg, redis, openai) are raised ``from`` the original so the cause
stays in the traceback.

Over HTTP the hand-over's refusals are the classes above (the API's JSON names the
class in ``error``), and only the hand-over route raises HandoverUnavailable: a read,
a write, a status or a wait the API did not answer is a MemoryApiUnavailable, since
the turn's hand-over may well have been kept. Every error raised for an answer carries
``status`` and ``retry_after_s`` (None without an answer or a Retry-After).

A message is memfleet's own words, figures and field names: never a user or
session id and never user content, since spans carry it as ``exception.message``
(worker.telemetry.record_error) and the CLI prints it. The conflicts of a commit
take no argument at all, so that no raiser can name the user or the session.
"""

from __future__ import annotations

from typing import ClassVar


class MemfleetError(Exception):
    """Root of every error memfleet raises on purpose."""

    transient: ClassVar[bool] = False
    """True when trying the same work again later can succeed without anyone acting."""
    outage: ClassVar[bool] = False
    """True when a server memfleet depends on is down: waited out, whatever the tries."""
    # Over HTTP (worker.client.memory_api): the answer's status code and Retry-After in
    # seconds, when there was an answer and it had one; None otherwise.
    status: int | None = None
    retry_after_s: float | None = None


class InvalidHandover(MemfleetError, ValueError):
    """The hand-over's session id, user id or messages break the contract."""


class HandoverTooLarge(InvalidHandover):
    """A message, or the hand-over as a whole, is over its byte budget (UTF-8,
    worker.memory_rules). The message names the limit and the size, never the text.
    Not transient: the same hand-over is refused again."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(f"{what} is {size} bytes, over the limit of {limit}")
        self.size, self.limit = size, limit


class HandoverUnavailable(MemfleetError):
    """Redis did not take the hand-over in time; the chat turn goes on without it."""

    transient = True


class HandoverBacklogFull(HandoverUnavailable):
    """The session already holds the most older message lists that no job has
    finished (workers down while the history was replaced again and again).
    The new list is not stored: hand the session over again later."""


class SessionBytesFull(HandoverBacklogFull):
    """Taking the new list would put the session's lists in Redis (latest and
    older together) over MEMFLEET_MAX_SESSION_BYTES. Older lists wait for a job to
    finish them; nothing held is replaced or dropped, and once a job finishes
    them the same hand-over is taken: transient, like a full backlog."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"the session would hold {size} bytes of message lists no job has"
                         f" finished, over the limit of {limit}")
        self.size, self.limit = size, limit


class UserSessionsFull(HandoverUnavailable):
    """The user already has MEMFLEET_MAX_USER_SESSIONS other sessions holding a
    message list in Redis that no job has finished. A session counts from its
    first unfinished hand-over until a commit finishes its lists (an idle session
    keeps only its meta and does not count). Transient: jobs finishing those
    sessions make room, with nobody acting."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the user has {limit} sessions with message lists no job has"
                         f" finished, the limit")
        self.limit = limit


class InvalidJob(MemfleetError):
    """A queued job or its payload cannot be read. Recorded, never retried."""


class LockLost(MemfleetError):
    """The session lock is no longer this job's: stop before the next model call.

    Not a failure of the session: the job hands it to a later job (as when the
    lock is busy), and the cursor fence keeps the slice from counting twice.
    """


class StoreError(MemfleetError):
    """PostgreSQL failed. Transient: the job is retried later, the cursor untouched."""

    transient = True


class StoreUnavailable(StoreError):
    """PostgreSQL cannot be reached, refused the connection, or is shutting down."""

    outage = True


class StoreConflict(MemfleetError):
    """A compare-and-set in the persist transaction lost; the transaction rolled back."""


class CursorFenced(StoreConflict):
    """The session's cursor moved since this run read it: the slice is already done."""

    def __init__(self) -> None:
        super().__init__("the session's cursor moved since the run read it")


class UserVersionConflict(StoreConflict):
    """The user's facts changed since consolidation read them: consolidate again."""

    transient = True

    def __init__(self) -> None:
        super().__init__("the user's facts changed since they were read")


class MemoryOptedOut(StoreConflict):
    """The user turned memory off since the run read their consent: the run moves
    the cursor past its slice as ``opted_out`` instead of writing facts."""

    def __init__(self) -> None:
        super().__init__("the user turned memory off during the run")


class UserErased(StoreConflict):
    """The user was erased after the run's hand-over was made: the run writes nothing."""

    def __init__(self, erased_seq: int = 0) -> None:
        super().__init__("the user was erased during the run")
        self.erased_seq = erased_seq  # the erase's number (Redis clock, microseconds)


class ConsolidationContention(MemfleetError):
    """Other jobs of the same user kept committing first; retry the job later."""

    transient = True


class ProviderError(MemfleetError):
    """An LLM or embeddings call failed in a way another try will not fix (a refused request)."""


class ModelBudgetBusy(MemfleetError):
    """The fleet's model budget (worker.protection.budget) gave this call no slot within
    MEMFLEET_LLM_BUDGET_WAIT_MAX_S. Nothing failed: the fleet is as busy as its
    budget allows. The job hands its session to a later job, spending no try and
    leaving the circuit breaker alone (worker.fleet.job_outcome)."""

    transient = True


class ProviderUnavailable(ProviderError):
    """A transient provider failure that persisted through the call's own retries."""

    transient = True


class ProviderAnswerInvalid(ProviderError):
    """The provider answered, but the answer broke the schema or the request's ids.

    Transient: models are sampled, and the next try may answer well, but only
    ANSWER_JOB_TRIES tries of the job (not MEMFLEET_MAX_TRIES, which is for
    outages): each try already asked MEMFLEET_LLM_ANSWER_ATTEMPTS times, and a
    model that broke the schema that often on a slice will mostly go on doing so.
    Then consolidation holds its candidates for the user (worker.pipeline.consolidate)
    and an extraction that never answered has its slice skipped on the record
    (worker.fleet.job_outcome).
    """

    transient = True


# The job's tries for an answer that stays unusable (ProviderAnswerInvalid): one
# more, later, for a fresh sample of both passes; never MEMFLEET_MAX_TRIES' eight
# with their backoff (docs/llm_wire.md).
ANSWER_JOB_TRIES = 2


def answer_try_left(job_try: int, max_tries: int) -> bool:
    """Whether a job on try ``job_try`` that got no usable answer is tried again."""
    return job_try < min(max_tries, ANSWER_JOB_TRIES)


class OfflineAnswerInvalid(ProviderAnswerInvalid):
    """The offline (rules) provider's answer broke the wire format. Not transient:
    the provider is deterministic, so another try gives the same answer; the job
    skips the slice at once, on the record (worker.fleet.job_outcome)."""

    transient = False


class ProviderWorkOverBudget(ProviderError):
    """The provider's CPU work on user text (the offline rules provider's patterns)
    went over MEMFLEET_PROVIDER_CPU_BUDGET_S for one call. Another try would cost
    as much: the job skips the slice at once, on the record
    (worker.fleet.job_outcome)."""


class ConfigurationError(MemfleetError):
    """Settings that cannot work: an operator must act before a retry can succeed."""


class UnexpectedJobError(MemfleetError):
    """Stands in, for ARQ, for an exception memfleet did not expect in a job: ARQ
    logs what a job raises with its message and traceback, and a foreign message
    can quote user content. It names the type and place of the original only."""


class MemoryApiError(MemfleetError):
    """The memory API refused a call, or answered what the client cannot read
    (worker.client.memory_api). The message names the operation and the API's
    scheme://host:port, never the key or token, a user id or user content."""


class AccessDenied(MemoryApiError):
    """401 or 403: no credential, a refused one, a service key without the route's
    scope, or an end user's token on another user's path. Not transient."""


class NotFound(MemoryApiError):
    """404: no such fact or held proposal for this user (another user's is exactly
    as missing)."""


class WriteConflict(MemoryApiError):
    """409: the fact is no longer the active version, or the held proposal was
    answered or went stale since it was read. Nothing was written: read again."""


class MemoryOff(WriteConflict):
    """409 with error MemoryOff: an add asked only while the user's memory is on
    (``if_memory_on``, as the memory tools ask) found it off. Nothing was stored."""


class InvalidRequest(MemoryApiError, ValueError):
    """400, 413 or 422 on a route other than the hand-over: the call's arguments
    break the API's rules (the message says which, never echoing the input)."""


class RateLimited(MemoryApiError):
    """429: the user's manual writes, erases and consent changes, or exports at
    once, are at their bound; ``retry_after_s`` says when one goes."""

    transient = True


class MemoryApiUnavailable(MemoryApiError):
    """The memory API did not answer in time (connection refused, a timeout) or
    answered 5xx, on any route but the hand-over (which raises HandoverUnavailable).
    Nothing says the call took effect or not; a read may be tried again later."""

    transient = True


class LongPollRefused(MemoryApiError):
    """A wait or an event stream the API has no slot for now (docs/api.md,
    "Long-lived requests"). Not a HandoverUnavailable: the hand-over was kept,
    only following it was refused; ask again after ``retry_after_s``."""

    transient = True


class TooManyLongPolls(LongPollRefused):
    """429: the caller (this service key, or this user's token) holds its share."""


class LongPollsFull(LongPollRefused):
    """503: the API process holds its fill of them, whoever holds them."""
