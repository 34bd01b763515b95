"""The outcome names are a contract: the memory_run rows, the jobs metric's label the
dashboard and the alerts select on, `memfleet runs --outcome`, the job's result in ARQ.
One enum (worker.outcomes.Outcome) holds them; these tests tie each reader to it."""

from __future__ import annotations

import os
import re

import pytest

from tests.unit.deploy.test_dashboard import alert_exprs, dashboard_exprs
from worker.cli.main import build_parser, main
from worker.errors import MemfleetError
from worker.fleet.job import JobEnd
from worker.outcomes import (
    ATTEMPTS,
    CURSOR_MOVES,
    DEAD_LETTERS,
    Outcome,
    parse_dead_letter_outcomes,
)
from worker.pipeline.persist import RunResult
from worker.protection.retry_policy import GIVEN_UP, Next
from worker.protocol.arq_worker import FAILED_RESULTS
from worker.protocol.serialization import serialize

# Stored in memory_run and in dashboards: renaming one needs a migration and new panels.
STORED_NAMES = {"committed", "empty", "fenced", "skipped", "opted_out", "erased", "deferred",
                "invalid", "retry", "failed", "error", "cancelled", "adopted"}
_OUTCOME_MATCHER = re.compile(r'outcome\s*(=~|!~|!=|=)\s*\\?"([^"\\]*)\\?"')


def selected_outcomes(expr: str) -> set[str]:
    return {value for _, values in _OUTCOME_MATCHER.findall(expr) for value in values.split("|")}


def test_the_outcome_names_are_the_stored_ones() -> None:
    assert {outcome.value for outcome in Outcome} == STORED_NAMES
    assert all(type(outcome.value) is str for outcome in Outcome)


def test_the_dashboard_and_the_alerts_select_only_outcomes() -> None:
    exprs = [*dashboard_exprs(), *alert_exprs().values()]
    selected = set().union(*(selected_outcomes(expr) for expr in exprs))
    assert selected, "the panels and alerts split jobs by outcome"
    assert selected <= {outcome.value for outcome in Outcome}


def test_the_dead_letters_alert_counts_exactly_the_dead_letters() -> None:
    dead = {name: expr for name, expr in alert_exprs().items()
            if name.startswith("MemfleetDeadLetters")}
    assert [selected_outcomes(expr) for expr in dead.values()] == [set(DEAD_LETTERS)]
    assert set(DEAD_LETTERS) >= GIVEN_UP, "a session given up on is a dead letter"


def test_runs_lists_the_dead_letters_by_default_and_refuses_any_other_outcome() -> None:
    args = build_parser().parse_args(["runs"])
    assert parse_dead_letter_outcomes(args.outcome) == list(DEAD_LETTERS)
    assert parse_dead_letter_outcomes(" failed ,error") == [Outcome.FAILED, Outcome.ERROR]
    valid = "(one of: failed, skipped, invalid, error)"
    with pytest.raises(MemfleetError) as unknown:
        parse_dead_letter_outcomes("failed,comitted")
    assert str(unknown.value) == f"unknown outcome 'comitted' {valid}"
    with pytest.raises(MemfleetError) as alive:
        parse_dead_letter_outcomes("committed")
    assert str(alive.value) == f"'committed' is not a dead-letter outcome {valid}"
    with pytest.raises(MemfleetError, match="names no outcome"):
        parse_dead_letter_outcomes(" , ")


def test_the_outcomes_dead_letters_are_read_with() -> None:
    assert set(CURSOR_MOVES) == {Outcome.COMMITTED, Outcome.SKIPPED, Outcome.OPTED_OUT}
    assert set(ATTEMPTS) == {*DEAD_LETTERS, Outcome.RETRY}
    assert FAILED_RESULTS == GIVEN_UP, "ARQ's summary counts a session given up as failed"


def test_runs_refuses_an_unknown_outcome_in_one_line_before_any_server(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [n for n in os.environ if n.startswith("MEMFLEET_")]:
        monkeypatch.delenv(name)
    # A server that is not there: the refusal comes before anything connects or starts.
    monkeypatch.setenv("MEMFLEET_DATABASE_URL", "postgresql://u@127.0.0.1:9/db")
    monkeypatch.setenv("MEMFLEET_REDIS_URL", "redis://127.0.0.1:9")
    assert main(["runs", "--outcome", "failed,comitted"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("memfleet: unknown outcome")


def test_the_retry_policy_ends_jobs_with_outcomes() -> None:
    assert {decision.outcome for decision in Next} == {
        Outcome.RETRY, Outcome.FAILED, Outcome.SKIPPED, Outcome.DEFERRED}


def test_the_job_result_arq_keeps_is_plain_json_with_the_same_names() -> None:
    assert serialize(JobEnd(Outcome.DEFERRED, reason="busy").as_dict()) == (
        b'{"outcome":"deferred","reason":"busy"}')
    assert serialize(JobEnd(Outcome.FAILED, error="ProviderError: refused").as_dict()) == (
        b'{"outcome":"failed","error":"ProviderError: refused"}')
    assert serialize(JobEnd(Outcome.ADOPTED, sessions=2).as_dict()) == (
        b'{"outcome":"adopted","sessions":2}')
    committed = JobEnd.of(RunResult(Outcome.COMMITTED, 7, added=1)).as_dict()
    assert (committed["outcome"], committed["run_id"], committed["added"]) == ("committed", 7, 1)
    assert serialize(committed).startswith(b'{"outcome":"committed","run_id":7,')
