"""The job's retry policy is the error tree: only what can heal by itself is tried again."""

from __future__ import annotations

import pytest

from worker.embedded.process import EmbeddedServerError
from worker.errors import (
    AccessDenied,
    ConfigurationError,
    ConsolidationContention,
    CursorFenced,
    HandoverBacklogFull,
    HandoverTooLarge,
    HandoverUnavailable,
    InvalidHandover,
    InvalidJob,
    InvalidRequest,
    LockLost,
    LongPollRefused,
    LongPollsFull,
    MemfleetError,
    MemoryApiError,
    MemoryApiUnavailable,
    MemoryOff,
    MemoryOptedOut,
    ModelBudgetBusy,
    NotFound,
    OfflineAnswerInvalid,
    ProviderAnswerInvalid,
    ProviderError,
    ProviderUnavailable,
    ProviderWorkOverBudget,
    RateLimited,
    SessionBytesFull,
    StoreError,
    StoreUnavailable,
    TooManyLongPolls,
    UnexpectedJobError,
    UserErased,
    UserSessionsFull,
    UserVersionConflict,
    WriteConflict,
)
from worker.protection.retry_policy import Next, after_error
from worker.protocol.webhook_signature import SignatureInvalid

PERMANENT = [ProviderError("refused (HTTP 400)"), ConfigurationError("unknown model"),
             InvalidJob("bad payload"), InvalidHandover("bad"), CursorFenced(),
             LockLost("gone"), EmbeddedServerError("no binaries"), MemoryOptedOut(),
             UserErased(), HandoverTooLarge("a message", 70_000, 65_536),
             UnexpectedJobError("RuntimeError at x.py:1"),
             SignatureInvalid("a receiver's check; never raised in a job"),
             # The memory API's client (worker.client.memory_api): never raised in a job.
             MemoryApiError("an answer the client cannot read"), AccessDenied("403"),
             NotFound("404"), WriteConflict("409"), MemoryOff("409 memory off"),
             InvalidRequest("422")]
# Deterministic work on the slice's own text: another try would end the same way.
SKIPPED_AT_ONCE = [OfflineAnswerInvalid("the rules' answer breaks the wire"),
                   ProviderWorkOverBudget("over 2 s of CPU")]
TRANSIENT = [StoreError("down"), ProviderUnavailable("503"),
             ConsolidationContention("busy user"), UserVersionConflict(),
             HandoverUnavailable("redis"), HandoverBacklogFull("32 older lists"),
             SessionBytesFull(5_000_000, 4_194_304), UserSessionsFull(16),
             StoreUnavailable("connection refused"),
             # The job defers its session before asking the policy (worker.fleet.job_outcome); were
             # the policy asked, it would retry it like any transient error.
             ModelBudgetBusy("no slot"),
             # The memory API's client: a call that may go later (never raised in a job).
             RateLimited("429"), MemoryApiUnavailable("503"), LongPollRefused("no slot"),
             TooManyLongPolls("429"), LongPollsFull("503")]


@pytest.mark.parametrize("error", PERMANENT, ids=lambda e: type(e).__name__)
def test_a_permanent_error_ends_the_run_at_once(error: MemfleetError) -> None:
    assert not error.transient
    assert after_error(error, job_try=1, max_tries=8) is Next.FAIL


@pytest.mark.parametrize("error", TRANSIENT, ids=lambda e: type(e).__name__)
def test_a_transient_error_is_retried_until_the_last_try(error: MemfleetError) -> None:
    assert error.transient
    assert after_error(error, job_try=1, max_tries=8) is Next.RETRY
    assert after_error(error, job_try=7, max_tries=8) is Next.RETRY
    last = after_error(error, job_try=8, max_tries=8)
    if isinstance(error, StoreUnavailable):
        assert last is Next.WAIT_OUT, "a database outage is waited out, whatever the tries"
    else:
        assert last is Next.FAIL


def test_an_unusable_answer_is_tried_twice_whatever_max_tries() -> None:
    # Issue 38: eight tries of a job with backoff (7-8.5 minutes on a small model) for
    # a model that broke the schema on every ask; the asks within a try (answer
    # attempts, the consolidation re-ask) and the job's tries no longer multiply.
    error = ProviderAnswerInvalid("schema")
    assert error.transient
    assert after_error(error, job_try=1, max_tries=8) is Next.RETRY
    assert after_error(error, job_try=2, max_tries=8) is Next.SKIP
    assert after_error(error, job_try=1, max_tries=1) is Next.SKIP


@pytest.mark.parametrize("error", SKIPPED_AT_ONCE, ids=lambda e: type(e).__name__)
def test_deterministic_provider_work_skips_the_slice_at_once(error: MemfleetError) -> None:
    assert not error.transient
    assert after_error(error, job_try=1, max_tries=8) is Next.SKIP


def test_every_memfleet_error_class_states_its_policy() -> None:
    def subclasses(cls: type[MemfleetError]) -> set[type[MemfleetError]]:
        found = set(cls.__subclasses__())
        for sub in list(found):
            found |= subclasses(sub)
        return found

    covered = {type(e) for e in PERMANENT + TRANSIENT + SKIPPED_AT_ONCE}
    covered.add(ProviderAnswerInvalid)
    assert subclasses(MemfleetError) - {CursorFenced.__base__} <= covered | {MemfleetError}
