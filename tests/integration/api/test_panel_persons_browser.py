"""The memory panel's people in a real browser: headless Chromium (Debian's ``chromium``)
driven by playwright-core from node's test runner (tests/browser/persons.test.mjs),
against the real API, PostgreSQL, Redis and a ``memfleet worker`` on the LLM stub, as in
tests/integration/api/test_panel_browser.py (whose fleet and hand-over this reuses).

Here kim's conversations make her persons the way a chat product does (HTTP hand-overs,
each waited for until a worker's commit): her sister Ana, her boss Tom, her brother Leo,
each with a fact of their own beside her own fact; and she made a friend by hand whose
name is markup. The browser test then shows her facts by person, moves a fact, renames
a person, merges two, and checks each change through the API.
``MEMFLEET_WRITE_SCREENSHOT=1`` also writes docs/panel-persons.png."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.api_server import bearer, token
from tests.integration.api.test_panel_browser import (
    INJECTION,
    Conversations,
    _service_key,
    panel_fleet,
    require_browser,
)
from tests.openai_stub import openai_settings
from tests.typescript_node import ROOT, run_node
from worker.config import Settings

SAID = {
    "k1": "My sister Ana is vegetarian. I live in Munich.",
    "k2": "My boss Tom moved to Berlin.",
    "k3": "My brother Leo plays chess.",
}


async def seed(api: httpx.AsyncClient, talk: Conversations) -> None:
    for session, text in SAID.items():
        await talk.say("kim", session, text)
    made = await api.post("/users/kim/persons", headers=bearer("kim"),
                          json={"display_name": INJECTION, "relation": "friend"})
    assert made.status_code == 201, made.text
    listed = (await api.get("/users/kim/persons", headers=bearer("kim"))).json()["persons"]
    assert [(p["display_name"], p["relation"], [f["text"] for f in p["facts"]])
            for p in listed] == [
        ("Ana", "sister", ["The user's sister Ana is vegetarian"]),
        ("Tom", "boss", ["The user's boss Tom moved to Berlin"]),
        ("Leo", "brother", ["The user's brother Leo plays chess"]),
        (INJECTION, "friend", [])]


async def test_the_panel_shows_and_changes_the_people_in_chromium(
    settings: Settings, stub: StubServer, redis: Redis, tmp_path: Path,
) -> None:
    require_browser()
    fleet = openai_settings(settings, stub, persons=True)  # MEMFLEET_PERSONS: off by default
    write_shots = os.environ.get("MEMFLEET_WRITE_SCREENSHOT") == "1"
    async with panel_fleet(fleet, tmp_path) as url, \
            httpx.AsyncClient(base_url=url, timeout=30) as api:
        await seed(api, Conversations(api, await _service_key(fleet.database_url or ""), redis))
        env = {
            **os.environ,
            "MEMFLEET_PANEL_URL": url,
            "MEMFLEET_PANEL_TOKEN_KIM": token("kim", ttl_s=900),
            "MEMFLEET_PANEL_INJECTION": INJECTION,
            "MEMFLEET_PANEL_SHOTS": str(ROOT / "docs" if write_shots else tmp_path),
        }
        done = await asyncio.to_thread(
            run_node, ["--test", "--test-concurrency=1", "tests/browser/persons.test.mjs"],
            env, 300)
    print(done.stdout)  # node's own report
    assert "# fail 0" in done.stdout and "# pass " in done.stdout
