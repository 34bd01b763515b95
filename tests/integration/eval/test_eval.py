"""`memfleet eval` against real servers: the shipped suite through the hand-over, a worker
and PostgreSQL, on the offline rules provider and on the OpenAI-compatible stub, and a
deliberately broken consolidation (every decision ADD) scoring visibly lower.

The rules provider answers like an oracle only for the plain English first-person
phrasings it knows (worker/providers/rules_patterns.py), so its figures below are
measured, not perfect, and each shortfall is a finding about the stub, not the suite:
it reads no language but English, no context or summary ("the Danish one"), no "I've
lived in X since 2019", no retraction that names its fact by a pronoun ("I'm not
allergic to it"), no cancelled plan, and it takes a quoted friend's "I" for the
user's. A pasted email's "I" it takes for the user's too, and the pipeline's screen
leaves that out (worker/pipeline/provenance.py): injection 24/30 before the screen,
30/30 with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.helpers import worker_env
from worker.config import Settings
from worker.read import BLOCK_HEADER

# Assertions held / assertions per kind with the rules provider (measured; see the
# module docstring for why the stub falls short where it does).
RULES = {
    "plain": (40, 40), "updates": (30, 30), "retractions": (16, 20), "aba": (40, 40),
    "contradictions": (30, 30), "relative_dates": (7, 10), "expiring": (21, 27),
    "paraphrase": (10, 10), "other_people": (22, 22), "hypotheticals": (30, 30),
    "short_replies": (0, 28), "two_agents": (35, 37), "non_english": (0, 38),
    "injection": (30, 30), "portrait_update": (39, 39),
    # The people in a user's life (docs/persons.md): MEMFLEET_PERSONS on (off by default:
    # without it the two kinds are left out and other_people holds 19 of 22).
    "named_people": (41, 41), "person_changes": (47, 47),
}
RULES_TOTAL = (438, 519)
# Questions answered right / asked per kind by the offline answer rules (the stub's
# memory_question task; worker/eval/qa_rules.py), measured. Its misses: the facts
# the rules never learned (non_english, short_replies, "since 2019"), two nicknames
# or two tools held at once (a hedge "Emacs or Elixir"), and questions sharing no
# word with their fact ("What diet does the user follow?" of "Is vegan"). "Yesterday"
# and "last month" are answered since the block says when a fact became true
# ("since ..."; 1 of 4 before).
QA_RULES = {
    "plain": (28, 34), "updates": (9, 10), "aba": (10, 10), "contradictions": (10, 10),
    "relative_dates": (7, 10), "expiring": (7, 7), "paraphrase": (10, 10),
    "other_people": (8, 8), "hypotheticals": (6, 6), "short_replies": (0, 10),
    "two_agents": (15, 16), "non_english": (0, 14), "injection": (8, 8),
    "named_people": (2, 2), "person_changes": (1, 1),
}
# The gold fact first, within the top 3, and first by meaning alone, in the search
# for the question among the haystack's distractors, hashing embeddings at the tests'
# 256 dimensions (measured on the suite of issue 40; 10, 21, 14 at 1536 on the 49
# scenarios before, docs/eval.md).
RETRIEVAL_HASHING = (27, 57, 31)
# The kinds a consolidation that never supersedes must lose on.
SUPERSEDING = ("updates", "retractions", "aba", "contradictions", "paraphrase",
               "portrait_update")


def _memfleet(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "worker.cli", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def _eval(env: dict[str, str], tmp_path: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    out = tmp_path / f"eval-{len(list(tmp_path.iterdir()))}.json"
    done = _memfleet(env, "eval", "--json", str(out), *args)
    assert done.returncode in (0, 1), done.stderr
    print(done.stdout)
    return done.returncode, json.loads(out.read_text("utf-8")), done.stdout


def _figures(document: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {k["kind"]: (k["held"], k["assertions"]) for k in document["kinds"]}


def _answered(document: dict[str, Any], key: str = "exact") -> dict[str, tuple[int, int]]:
    return {k["kind"]: (k[key], k["questions"]) for k in document["qa"]["kinds"]}


async def _leftovers(settings: Settings) -> tuple[int, list[bytes]]:
    conn = await asyncpg.connect(settings.database_url)
    try:
        rows = await conn.fetchval(
            "SELECT (SELECT count(*) FROM memory_fact WHERE user_id LIKE 'eval-%')"
            " + (SELECT count(*) FROM memory_run WHERE user_id LIKE 'eval-%')"
            " + (SELECT count(*) FROM session_cursor WHERE user_id LIKE 'eval-%')")
    finally:
        await conn.close()
    redis = Redis.from_url(settings.redis_url or "")
    try:
        keys = [k async for k in redis.scan_iter("*eval*")]
    finally:
        await redis.aclose()
    return int(rows), keys


async def test_the_rules_provider_reaches_its_measured_scores_and_leaves_nothing(
        settings: Settings, tmp_path: Path) -> None:
    code, document, stdout = _eval(worker_env(settings, persons="true"), tmp_path, "--qa",
                                   "--retrieval")
    assert code == 0
    assert _figures(document) == RULES
    assert _answered(document) == QA_RULES
    assert document["qa"]["answer_model"] == "rules-v1" and document["qa"]["judge_model"] is None
    total = document["qa"]["total"]
    assert (total["gold_at_1"], total["gold_at_3"], total["gold_by_meaning_at_1"]) == \
        RETRIEVAL_HASHING
    total = document["total"]
    assert (total["held"], total["assertions"]) == RULES_TOTAL
    assert document["models"] == {"extraction": "rules-v1", "consolidation": "rules-v1",
                                  "embeddings": f"hashing-v1 ({settings.embed_dim} dims)"}
    assert document["prompt_version"] and document["control"] is None
    assert set(document["runs"]) == {"committed"}  # no run failed: the scores are memory's
    assert len(document["scenarios"]) == 173
    # The baselines, beside it in the table and the JSON, hold nothing (docs/eval.md).
    assert {name: b["total"]["held"] for name, b in document["baselines"].items()} == \
        {"empty": 0, "raw-messages": 0, "latest-session": 0}
    assert "beside the baselines" in stdout and "raw-messages" in stdout
    low, high = document["total"]["interval"]
    assert low < document["total"]["accuracy"] < high
    assert "total" in stdout and "did not hold:" in stdout
    # Every user, run and key of the run is gone; the servers are as they were.
    assert await _leftovers(settings) == (0, [])


async def test_a_consolidation_that_only_adds_scores_visibly_lower(
        settings: Settings, tmp_path: Path) -> None:
    kinds = [arg for kind in SUPERSEDING for arg in ("--kind", kind)]
    env = worker_env(settings)
    _, right, _ = _eval(env, tmp_path, *kinds, "--qa")
    _, add_only, stdout = _eval(env, tmp_path, *kinds, "--control", "add-only", "--qa")
    assert add_only["control"] == "add-only" and "control: add-only" in stdout
    right_kinds = {k["kind"]: k for k in right["kinds"]}
    for kind in add_only["kinds"]:
        good = right_kinds[kind["kind"]]
        print(f"{kind['kind']}: accuracy {good['accuracy']:.3f} -> {kind['accuracy']:.3f},"
              f" duplicates {good['duplicates']} -> {kind['duplicates']},"
              f" chains {good['chains_held']}/{good['chains']} ->"
              f" {kind['chains_held']}/{kind['chains']}")
        # Lower accuracy, or (paraphrases) the same facts held twice.
        assert (kind["accuracy"] < good["accuracy"] or kind["duplicates"] > good["duplicates"])
        assert kind["passed"] < good["passed"]
        assert kind["chains_held"] == 0
    print(f"total: {right['total']['accuracy']:.3f} -> {add_only['total']['accuracy']:.3f}")
    assert add_only["total"]["accuracy"] < right["total"]["accuracy"] - 0.3
    # Asked "which city?", a reader given the old value beside the new one cannot tell
    # which holds: the questions of the superseding kinds are answered visibly worse.
    answered, answered_add_only = _answered(right), _answered(add_only)
    print(f"answered: {answered} -> {answered_add_only}")
    for kind in ("updates", "contradictions", "aba"):
        assert answered_add_only[kind][0] < answered[kind][0], kind
    assert add_only["qa"]["total"]["exact"] <= right["qa"]["total"]["exact"] - 5


async def test_the_openai_providers_on_the_stub_score_and_answer_as_the_rules_do(
        settings: Settings, stub: StubServer, tmp_path: Path) -> None:
    # The stub answers with the rules over the wire, and embeds by hashing: the same
    # end states through the openai providers' requests, schemas and parsing; and the
    # same answers through the answer and judge models' (one run: --qa --retrieval).
    stub.reset()
    env = worker_env(settings, llm_provider="openai", llm_base_url=stub.v1,
                     embed_provider="openai", embed_base_url=stub.v1,
                     extract_model="stub-extract", consolidate_model="stub-consolidate",
                     eval_answer_model="stub-answer", eval_judge_model="stub-judge",
                     persons="true")
    code, document, stdout = _eval(env, tmp_path, "--qa", "--retrieval")
    assert code == 0
    assert _figures(document) == RULES
    assert document["models"]["extraction"] == "stub-extract"
    assert document["models"]["consolidation"] == "stub-consolidate"
    qa = document["qa"]
    assert (qa["answer_model"], qa["judge_model"]) == ("stub-answer", "stub-judge")
    assert "answered by stub-answer" in stdout and "judge stub-judge" in stdout
    assert _answered(document) == QA_RULES
    # The stub's judge compares words: it agrees with exact match on every question
    # but none (a date said in other words would differ; the suite's answers do not).
    assert _answered(document, "judged") == QA_RULES
    total = qa["total"]
    assert (total["gold_at_1"], total["gold_at_3"], total["gold_by_meaning_at_1"]) == \
        RETRIEVAL_HASHING
    # The answers came over HTTP, from the block a chat server reads.
    asked = [r["body"] for r in stub.recorded() if r["path"] == "/v1/chat/completions"]
    tasks = [json.loads(b["messages"][-1]["content"]) for b in asked]
    questions = [(b, t) for b, t in zip(asked, tasks, strict=True)
                 if t["task"] == "memory_question"]
    judged = [b for b, t in zip(asked, tasks, strict=True) if t["task"] == "answer_judgement"]
    assert len(questions) == len(judged) == total["questions"]
    assert {b["model"] for b, _ in questions} == {"stub-answer"}
    assert {b["model"] for b in judged} == {"stub-judge"}
    city = next(t for _, t in questions if t["question"] == "Which city does the user live in?"
                and "Madrid" in t["known_facts"])
    assert city["known_facts"].startswith(BLOCK_HEADER)
    assert "Porto" not in city["known_facts"]  # superseded: not in the block


async def test_a_broken_read_answers_visibly_fewer_right(
        settings: Settings, stub: StubServer, tmp_path: Path) -> None:
    # The same memory, but the answers given an empty known-facts block: the floor a
    # model without memory reaches (the rules: nothing; a real model may guess some).
    stub.reset()
    env = worker_env(settings, llm_provider="openai", llm_base_url=stub.v1,
                     embed_provider="openai", embed_base_url=stub.v1)
    kinds = ("plain", "injection")
    args = [arg for kind in kinds for arg in ("--kind", kind)]
    _, document, stdout = _eval(env, tmp_path, *args, "--qa", "--control", "empty-read")
    assert "control: empty-read" in stdout
    assert document["control"] is None and document["qa"]["control"] == "empty-read"
    assert _figures(document) == {kind: RULES[kind] for kind in kinds}  # memory as before
    assert _answered(document) == {kind: (0, QA_RULES[kind][1]) for kind in kinds}
    blocks = [json.loads(r["body"]["messages"][-1]["content"]) for r in stub.recorded()
              if r["path"] == "/v1/chat/completions"]
    assert {b["known_facts"] for b in blocks if b["task"] == "memory_question"} == {""}


@pytest.mark.parametrize(("minimum", "code"), [("0.5", 0), ("1", 1)])
async def test_min_score_exits_1_below_it(settings: Settings, tmp_path: Path, minimum: str,
                                          code: int) -> None:
    plot = tmp_path / "scores.png"
    got, document, _ = _eval(worker_env(settings), tmp_path, "--kind", "retractions",
                             "--min-score", minimum, "--plot", str(plot))
    held, assertions = RULES["retractions"]
    assert document["total"]["accuracy"] == pytest.approx(held / assertions, abs=1e-4)
    assert got == code
    assert plot.read_bytes().startswith(b"\x89PNG")  # drawn whatever the exit code


async def test_servers_not_migrated_are_one_line_and_exit_2(
        settings: Settings, empty_database_url: str, tmp_path: Path) -> None:
    env = worker_env(settings.model_copy(update={"database_url": empty_database_url}))
    done = _memfleet(env, "eval")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("memfleet: ") and "memfleet migrate" in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
