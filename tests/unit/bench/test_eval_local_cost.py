"""bench.eval_local's comparison, pure: calls attributed to the system whose base URL they
came through, the cost per user turn with coalescing, the systems' table with the
baselines, the estimate before a run. No model, no server."""

from __future__ import annotations

import json
from typing import Any

from bench.eval_local import cost, subset
from bench.eval_local.calls import judge_all
from bench.eval_local.estimate import before_run
from bench.eval_local.serve import split_system
from bench.eval_local.systems import system_url
from worker.eval.baselines import baseline_scores
from worker.eval.compare import System, comparison
from worker.eval.report import scores_json
from worker.eval.suite import load_suite


def _chat(system: str, prompt: int, cached: int, answer: int, seconds: float,
          content: str = '{"facts": []}') -> dict[str, Any]:
    return {"system": system, "status": 200, "seconds": seconds,
            "request": {"messages": [{"role": "system", "content": "mem0's own prompt"},
                                     {"role": "user", "content": "Input: ..."}],
                        "response_format": {"type": "json_object"}},
            "response": {"choices": [{"message": {"content": content},
                                      "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": prompt, "completion_tokens": answer,
                                   "prompt_tokens_details": {"cached_tokens": cached}}}}


def test_each_system_has_a_base_url_of_its_own_on_the_one_endpoint() -> None:
    url = system_url("http://127.0.0.1:4000/v1", "mem0-1.0.9")
    assert url == "http://127.0.0.1:4000/sys/mem0-1.0.9/v1"
    path = url.removeprefix("http://127.0.0.1:4000") + "/chat/completions"
    assert split_system(path) == ("mem0-1.0.9", "/v1/chat/completions")
    assert split_system("/v1/embeddings") == ("", "/v1/embeddings")


def test_calls_are_attributed_to_their_system_and_divided_by_user_turns() -> None:
    record = [_chat("memfleet", 1000, 800, 40, 4.0), _chat("mem0-1.0.9", 600, 0, 30, 6.0),
              _chat("memfleet", 500, 100, 20, 2.0), _chat("mem0-1.0.9", 900, 500, 50, 5.0),
              _chat("mem0-1.0.9", 300, 0, 10, 1.0, content="Sure, here you go"),
              {"system": "memfleet", "embeddings": 3}, {"system": "mem0-1.0.9", "embeddings": 5},
              {"system": "mem0-1.0.9", "embeddings": 1}]
    costs = {}
    for name in ("memfleet", "mem0-1.0.9"):
        calls = judge_all(e for e in record if "embeddings" not in e and e["system"] == name)
        costs[name] = cost.cost_of(name, calls, record, user_turns=4, commits=2)
    mine, theirs = costs["memfleet"], costs["mem0-1.0.9"]
    assert (mine.calls, mine.prompt_tokens, mine.cached_tokens, mine.uncached_tokens,
            mine.completion_tokens, mine.seconds, mine.embedded) == (2, 1500, 900, 600, 60,
                                                                     6.0, 3)
    assert (theirs.calls, theirs.prompt_tokens, theirs.cached_tokens, theirs.completion_tokens,
            theirs.seconds, theirs.embedded) == (3, 1800, 500, 90, 12.0, 6)
    assert theirs.by_task == {"other": 3}
    # mem0's answer that is not the JSON it asked for is counted, by its system
    assert [c.outcome for c in judge_all([record[4]])] == ["invalid_json"]
    rows = {line.split()[0]: line.split() for line in cost.table(list(costs.values()))
            .splitlines()[1:3]}
    # user turns, commits, calls, calls/turn, prompt, cached, uncached, answer, s, embedded,
    # turns/commit, turns/call
    assert rows["memfleet"][1:] == ["4", "2", "2", "0.50", "375", "225", "150", "15", "1.5",
                                    "0.8", "2.00", "2.00"]
    assert rows["mem0-1.0.9"][1:] == ["4", "2", "3", "0.75", "450", "125", "325", "22", "3.0",
                                      "1.5", "2.00", "1.33"]
    assert json.loads(json.dumps(mine.as_json()))["by_task"] == {"other": 2}


def test_coalescing_counts_each_user_turn_once_and_each_commit_once(tmp_path: Any) -> None:
    """update-city: two sessions of one user turn each (2 turns, 2 commits); the
    short-replies scenarios that commit each turn: a commit per user turn."""
    folder = subset.write(subset.pick(subset.suite_entries(), ids=["update-city"]), tmp_path)
    assert cost.workload(load_suite(folder)) == (2, 2)
    smoke = subset.write(subset.pick(subset.suite_entries(), ids=subset.SMOKE), tmp_path / "s")
    turns, commits = cost.workload(load_suite(smoke))
    assert commits == subset.runs(smoke)[1] == 8
    assert turns >= commits


def test_the_table_puts_the_baselines_beside_every_system(tmp_path: Any) -> None:
    folder = subset.write(subset.pick(subset.suite_entries(), per_kind=1, kinds=["updates"]),
                          tmp_path)
    scenarios = load_suite(folder)
    systems = [System(name, scores_json(scores))
               for name, scores in baseline_scores(scenarios).items()]
    text = comparison(systems)
    assert text.splitlines()[0].split() == ["kind", "empty", "raw-messages", "latest-session"]
    assert text.splitlines()[1].startswith("updates")
    assert "[0-0]" in text.splitlines()[1]  # with its interval


def test_the_estimate_before_a_run_scales_by_commits_and_model() -> None:
    big = dict(before_run(10, ["memfleet", "mem0-1.0.9"], "1.5b"))
    small = dict(before_run(10, ["memfleet", "mem0-1.0.9"], "0.5b"))
    assert big["memfleet"] == 10 * 2.2 * 9.0  # commits, calls a commit, seconds a call
    assert big["mem0-1.0.9"] > big["memfleet"]  # its prompts are longer
    assert small["memfleet"] < big["memfleet"]
    assert dict(before_run(20, ["memfleet"], "1.5b"))["memfleet"] == 2 * big["memfleet"]


def _run(scenarios: list[Any], seconds: float, turns: int) -> dict[str, Any]:
    systems = {name: scores_json(scores)
               for name, scores in baseline_scores(scenarios).items()}
    return {"model": "m", "scenarios": len(scenarios), "seconds": {"total": seconds},
            "systems": systems,
            "cost": [cost.Cost("memfleet", turns, 1, calls=2, prompt_tokens=100,
                               cached_tokens=50, completion_tokens=10, seconds=3.0,
                               embedded=4).as_json()]}


def test_batches_merge_into_the_table_of_all_their_scenarios(tmp_path: Any) -> None:
    from bench.eval_local.merge import merge

    entries = subset.pick(subset.suite_entries(), per_kind=2,
                          kinds=["updates", "two_agents", "injection"])
    first, second = entries[::2], entries[1::2]
    batches = [load_suite(subset.write(batch, tmp_path / str(n)))
               for n, batch in enumerate((first, second))]
    together = load_suite(subset.write(entries, tmp_path / "all"))
    systems, costs, facts = merge([_run(batches[0], 60.0, 3), _run(batches[1], 120.0, 5)])
    direct = {name: scores_json(scores) for name, scores in baseline_scores(together).items()}
    for system in systems:  # the same kinds, totals, intervals and false memories
        assert system.document["kinds"] == direct[system.name]["kinds"]
        assert system.document["total"] == direct[system.name]["total"]
    assert direct["raw-messages"]["total"]["false_memories"] > 0  # gated checks told apart
    assert facts == {"models": ["m"], "scenarios": 6, "minutes": 3.0}
    assert (costs[0].user_turns, costs[0].calls, costs[0].seconds) == (8, 4, 6.0)


def test_a_scenario_in_two_batches_is_refused(tmp_path: Any) -> None:
    import pytest

    from bench.eval_local.merge import merge

    scenarios = load_suite(subset.write(subset.pick(subset.suite_entries(), per_kind=1,
                                                    kinds=["updates"]), tmp_path))
    with pytest.raises(ValueError, match="run twice"):
        merge([_run(scenarios, 1.0, 1), _run(scenarios, 1.0, 1)])
