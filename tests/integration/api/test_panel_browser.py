"""The memory panel in a real browser: headless Chromium (Debian's ``chromium``) driven
by playwright-core from node's test runner (tests/browser/panel.test.mjs), against the
real API (uvicorn), PostgreSQL, Redis and a ``memfleet worker`` on the LLM stub.

Here the servers start and the user's memory is made the way a chat product makes it:
conversations handed over through the HTTP hand-over (a service key with the
``handover`` scope), each waited for until a worker's commit covers it; a pinned fact
that a later conversation changes, so a held proposal waits for the user. Tokens are
minted as a chat server mints them. The browser test then works the page and checks
each change through the API; afterwards the API's log must hold no token (it rode in the
fragment and the bearer header). ``MEMFLEET_WRITE_SCREENSHOT=1`` also writes docs/panel.png
(and docs/panel-phone.png); the figures it measured are printed (``-s``)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.api_server import api_settings, bearer, running_api, token
from tests.helpers import WorkerProcesses, worker_env
from tests.openai_stub import openai_settings
from tests.typescript_node import ROOT, run_node
from worker.client.handover import wait_for_memory
from worker.config import Settings
from worker.store.service_keys import ServiceKeyStore

CHROMIUM = Path("/usr/bin/chromium")
BROWSER_DIR = ROOT / "tests" / "browser"
MODULES_STAMP = BROWSER_DIR / "node_modules" / ".memfleet-stamp"
COMMIT_TIMEOUT_S = 60
INJECTION = "<img src=x onerror=alert(1)>"
OTHER_KEY = "another-key-0123456789abcdef-xyz"  # signs a token the API refuses


def require_browser() -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: `make browser-tools` installs Debian's chromium "
                    "as root (apt-get install chromium)")
    lock = BROWSER_DIR / "package-lock.json"
    if not MODULES_STAMP.exists() or MODULES_STAMP.stat().st_mtime < lock.stat().st_mtime:
        pytest.fail("tests/browser/node_modules is missing or older than its lock file: "
                    "run `make browser-tools`")


@asynccontextmanager
async def panel_fleet(settings: Settings, log_dir: Path) -> AsyncIterator[str]:
    """A worker and the API on ``settings``; yields the API's URL."""
    env = worker_env(settings, llm_provider="openai", llm_base_url=settings.llm_base_url or "",
                     embed_provider="openai", embed_base_url=settings.embed_base_url or "",
                     queue_name=settings.queue_name,
                     notes_enabled=str(settings.notes_enabled).lower(),
                     persons=str(settings.persons).lower())
    workers = WorkerProcesses(env, log_dir, 1)
    try:
        async with running_api(api_settings(settings)) as url:
            yield url
    finally:
        await asyncio.to_thread(workers.stop)


class Conversations:
    """Hand conversations over as a chat server does, and wait for their commits."""

    def __init__(self, api: httpx.AsyncClient, key: str, redis: Redis) -> None:
        self.api, self.key, self.redis = api, key, redis

    async def say(self, user: str, session: str, text: str, agent: str | None = None) -> None:
        body: dict[str, object] = {"messages": [{"role": "user", "content": text},
                                                {"role": "assistant", "content": "Noted."}]}
        if agent is not None:
            body["agent_id"] = agent
        resp = await self.api.post(f"/users/{user}/sessions/{session}/handover", json=body,
                                   headers={"Authorization": f"Bearer {self.key}"})
        assert resp.status_code == 202, resp.text
        covered = await wait_for_memory(self.redis, session, user, resp.json()["handover_id"],
                                        timeout_s=COMMIT_TIMEOUT_S)
        assert covered, f"no commit covered {user}/{session} within {COMMIT_TIMEOUT_S} s"


async def _fact_id(api: httpx.AsyncClient, user: str, text: str) -> int:
    resp = await api.get(f"/users/{user}/facts", headers=bearer(user))
    ids = [f["id"] for g in resp.json()["groups"] for f in g["facts"] if f["text"] == text]
    assert ids, f"{text!r} is not among {user}'s facts: {resp.text}"
    return int(ids[0])


async def seed(api: httpx.AsyncClient, talk: Conversations) -> None:
    """ada: profile facts, an agent's relationship facts, a held change of a pinned fact and
    a note. eve: a fact and a note whose text is markup, and a held change gone stale."""
    await talk.say("ada", "s1", "I live in Paris. I work as a nurse. I love green tea. "
                                "My favourite city is Porto.")
    await talk.say("ada", "s2", "You can call me Captain. Our running joke is about penguins.",
                   agent="luna")
    paris = await _fact_id(api, "ada", "Lives in Paris")
    pinned = await api.put(f"/users/ada/facts/{paris}/pin", headers=bearer("ada"))
    assert pinned.status_code == 200, pinned.text
    await talk.say("ada", "s3", "I moved to Lisbon.")
    held = (await api.get("/users/ada/held-proposals", headers=bearer("ada"))).json()
    assert [p["text"] for p in held["proposals"]] == ["Lives in Lisbon"], held
    # A note beside her facts (docs/notes.md), and one of eve's made of markup.
    await talk.say("ada", "s4", "I'm thinking about a kitchen renovation, budget about $40k.")
    await talk.say("eve", "e0", f"I'm thinking about {INJECTION}.")
    added = await api.post("/users/eve/facts", json={"text": INJECTION}, headers=bearer("eve"))
    assert added.status_code == 201, added.text
    # eve's held change goes stale: she corrects the pinned fact by hand before answering.
    await talk.say("eve", "e1", "I live in Rome.")
    rome = await _fact_id(api, "eve", "Lives in Rome")
    assert (await api.put(f"/users/eve/facts/{rome}/pin", headers=bearer("eve"))).is_success
    await talk.say("eve", "e2", "I moved to Milan.")
    edited = await api.patch(f"/users/eve/facts/{rome}", json={"text": "Lives in Rome, Trastevere"},
                             headers=bearer("eve"))
    assert edited.status_code == 200, edited.text
    held = (await api.get("/users/eve/held-proposals", headers=bearer("eve"))).json()
    assert [(p["text"], p["stale"]) for p in held["proposals"]] == [("Lives in Milan", True)]


async def _service_key(database_url: str) -> str:
    store = await ServiceKeyStore.connect(database_url)
    try:
        _, key = await store.create("panel browser test (handover)", ["handover"])
        return key
    finally:
        await store.aclose()


async def test_the_panel_works_in_chromium_against_the_real_fleet(
    settings: Settings, stub: StubServer, redis: Redis, tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    require_browser()
    caplog.set_level(logging.INFO, logger="memfleet.api")
    fleet = openai_settings(settings, stub, notes_enabled=True)
    metrics = tmp_path / "metrics.json"
    write_shots = os.environ.get("MEMFLEET_WRITE_SCREENSHOT") == "1"
    async with panel_fleet(fleet, tmp_path) as url, \
            httpx.AsyncClient(base_url=url, timeout=30) as api:
        await seed(api, Conversations(api, await _service_key(fleet.database_url or ""), redis))
        tokens = {
            "MEMFLEET_PANEL_TOKEN": token("ada", ttl_s=900),
            "MEMFLEET_PANEL_TOKEN_EVE": token("eve", ttl_s=900),
            "MEMFLEET_PANEL_TOKEN_EXPIRED": token("ada", ttl_s=-120),
            "MEMFLEET_PANEL_TOKEN_FORGED": token("ada", secret=OTHER_KEY),
        }
        env = {
            **os.environ, **tokens,
            "MEMFLEET_PANEL_URL": url,
            "MEMFLEET_PANEL_INJECTION": INJECTION,
            "MEMFLEET_PANEL_METRICS": str(metrics),
            "MEMFLEET_PANEL_SHOTS": str(ROOT / "docs" if write_shots else tmp_path),
        }
        done = await asyncio.to_thread(
            run_node, ["--test", "--test-concurrency=1", "tests/browser/panel.test.mjs"], env, 300)
    print(done.stdout)  # node's own report
    print("panel figures:", json.dumps(json.loads(metrics.read_text("utf-8"))))
    assert "# fail 0" in done.stdout and "# pass " in done.stdout
    # The token rode in the fragment and the bearer header: the API's log has the page's
    # loads and the refusals, never a token.
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "GET /panel 200" in logged and "401 invalid_token (expired)" in logged
    assert not [name for name, value in tokens.items() if value in logged]
