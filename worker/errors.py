"""memfleet's exceptions: one root, translated from lower layers at the edge.

    MemfleetError
    ├── InvalidHandover        the caller's session/user/messages break the contract
    ├── HandoverUnavailable    Redis could not take the hand-over (outage, timeout)
    ├── InvalidJob             a job or its payload in Redis cannot be read; never retried
    ├── StoreError             PostgreSQL failed (connection, query); transient
    ├── StoreConflict          a compare-and-set in the persist transaction lost
    │   ├── CursorFenced           another run already committed this slice
    │   └── UserVersionConflict    another job changed this user's facts first
    ├── ProviderError          an LLM or embeddings call failed
    │   ├── ProviderUnavailable    transient: rate limit, 5xx, timeout, connection
    │   └── ProviderAnswerInvalid  the answer broke the schema or named unknown ids
    └── ConfigurationError     settings that cannot work (missing key, wrong dimension)

Lower-level errors (asyncpg, redis, openai) are raised ``from`` the original so the
cause stays in the traceback.
"""

from __future__ import annotations


class MemfleetError(Exception):
    """Root of every error memfleet raises on purpose."""


class InvalidHandover(MemfleetError, ValueError):
    """The hand-over's session id, user id or messages break the contract."""


class HandoverUnavailable(MemfleetError):
    """Redis did not take the hand-over in time; the chat turn goes on without it."""


class InvalidJob(MemfleetError):
    """A queued job or its payload cannot be read. Recorded, never retried."""


class StoreError(MemfleetError):
    """PostgreSQL failed. Transient: the job is retried later, the cursor untouched."""


class StoreConflict(MemfleetError):
    """A compare-and-set in the persist transaction lost; the transaction rolled back."""


class CursorFenced(StoreConflict):
    """The session's cursor moved since this run read it: the slice is already done."""


class UserVersionConflict(StoreConflict):
    """The user's facts changed since consolidation read them: consolidate again."""


class ProviderError(MemfleetError):
    """An LLM or embeddings call failed."""


class ProviderUnavailable(ProviderError):
    """A transient provider failure that persisted through the retries."""


class ProviderAnswerInvalid(ProviderError):
    """The provider answered, but the answer broke the schema or the request's ids."""


class ConfigurationError(MemfleetError):
    """Settings that cannot work."""
