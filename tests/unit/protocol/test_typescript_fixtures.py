"""The TypeScript client's golden fixtures (tests/fixtures/protocol/handover_cases.json)
are what the Python reference writes today: regenerate them with
``python -m tests.unit.protocol.typescript_fixtures`` when the protocol changes on
purpose, and the TypeScript unit tests then check the client against them."""

from __future__ import annotations

from tests.unit.protocol.typescript_fixtures import FIXTURE, render


def test_the_fixtures_are_what_the_python_side_writes() -> None:
    assert FIXTURE.read_text("utf-8") == render(), (
        "tests/fixtures/protocol/handover_cases.json is stale: run"
        " `python -m tests.unit.protocol.typescript_fixtures` and rebuild clients/typescript/")


def test_the_fixtures_cover_every_refusal_and_window() -> None:
    import json

    cases = json.loads(FIXTURE.read_text("utf-8"))
    assert {case["error"] for case in cases["invalid"]} == {"InvalidHandover", "HandoverTooLarge"}
    assert len(cases["invalid"]) >= 40 and len(cases["payloads"]) >= 8
    windowed = [p for p in cases["payloads"]
                if len(json.loads(p["payload"])["messages"]) < len(p["input"]["messages"])]
    assert len(windowed) >= 3
