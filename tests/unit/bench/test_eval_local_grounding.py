"""The portraits' grounding measure (bench.eval_local.grounding): what the facts
support and what the model added, read from a record of calls."""

from __future__ import annotations

import json

from bench.eval_local.grounding import main, measure, portrait_calls, unsupported

FACTS = ["The user likes chess.", "The user works at Siemens."]


def _record(task: str, facts: list[str], portrait: str, status: int = 200) -> str:
    request = {"task": task, "facts": [{"text": f, "category": "fact"} for f in facts],
               "max_words": 20}
    return json.dumps({
        "status": status,
        "request": {"messages": [{"role": "system", "content": "..."},
                                 {"role": "user", "content": json.dumps(request)}]},
        "response": {"choices": [{"message": {"content": json.dumps(
            {"portrait": portrait})}}]}})


def test_a_portrait_of_its_facts_alone_has_nothing_unsupported() -> None:
    assert unsupported("The user likes chess and works at Siemens.", FACTS) == []
    assert unsupported("The user works at Siemens, likes playing chess.", FACTS) == ["playing"]


def test_what_the_model_invented_is_counted() -> None:
    invented = ("The user is a 35-year-old male software engineer at Siemens who enjoys "
                "chess and hiking.")
    assert unsupported(invented, FACTS) == ["year", "male", "software", "engineer", "enjoys",
                                            "hiking"]


def test_only_answered_portrait_calls_are_read(tmp_path) -> None:  # type: ignore[no-untyped-def]
    lines = [_record("user_portrait", FACTS, "The user likes chess."),
             _record("user_portrait", FACTS, "The user likes hiking."),
             _record("fact_extraction", FACTS, "ignored"),
             _record("user_portrait", FACTS, "never answered", status=500)]
    calls = portrait_calls(lines)
    assert [p for _, p in calls] == ["The user likes chess.", "The user likes hiking."]
    g = measure(calls)
    assert (g.portraits, g.content_words, g.unsupported, g.fully_supported) == (2, 4, 1, 1)
    record = tmp_path / "calls.jsonl"
    record.write_text("\n".join(lines))
    assert main([str(record)]) == 0
    assert main([]) == 2 and main([str(tmp_path / "none.jsonl")]) == 2
