"""Memory off means off for reads too, on real PostgreSQL and the API over HTTP: while a
user's memory is off no prompt gets their facts (the API's known-facts, the chat
stand-in, worker.read's reader), their own view still shows what is kept, and on
again the block is back; another user is untouched (docs/memory_model.md, "Consent")."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import httpx
import pytest

from tests.api_server import bearer
from tests.helpers import worker_env
from worker.config import Settings
from worker.read import open_reader

ADA = ("Lives in Lisbon", "Plays the cello")
BOB = ("Lives in Porto",)


async def get(api: httpx.AsyncClient, user: str, path: str, **params: Any) -> Any:
    resp = await api.get(f"/users/{user}/{path}", params=params, headers=bearer(user))
    assert resp.status_code == 200, resp.text
    return resp.json()


async def prompts(api: httpx.AsyncClient, settings: Settings, user: str) -> dict[str, Any]:
    """What each prompt path reads for the user: the API's block (with and without a
    query), the chat stand-in's count, the reader's block and search."""
    known = await get(api, user, "known-facts")
    asked = await get(api, user, "known-facts", q="where do I live")
    turn = await api.post("/chat/s1", json={"content": "Where do I live?"}, headers=bearer(user))
    assert turn.status_code == 200, turn.text
    async with open_reader(settings) as reader:
        block = await reader.known_facts_block(user, query="where do I live", top_k=1)
        hits = await reader.search(user, "Lisbon Porto cello", top_k=5)
    return {"api": known["block"], "api_count": known["count"], "api_q": asked["block"],
            "chat": turn.json()["known_facts"], "reader": block, "search": len(hits)}


async def own_view(api: httpx.AsyncClient, user: str) -> list[str]:
    listed = await get(api, user, "facts")
    return sorted(f["text"] for group in listed["groups"] for f in group["facts"])


async def consent_cli(settings: Settings, action: str, user: str) -> dict[str, Any]:
    """``memfleet consent <action> --user <user>`` as a subprocess: what the issue ran."""
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "worker.cli", "consent", action, "--user", user],
        env=worker_env(settings), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


@pytest.mark.chat_standin  # it chats: the stand-in is mounted only when asked
async def test_memory_off_no_prompt_gets_the_users_facts_and_on_again_they_are_back(
    api: httpx.AsyncClient, settings: Settings
) -> None:
    for user, texts in (("ada", ADA), ("bob", BOB)):
        for text in texts:
            resp = await api.post(f"/users/{user}/facts", json={"text": text},
                                  headers=bearer(user))
            assert resp.status_code == 201, resp.text
    on = await prompts(api, settings, "ada")
    assert "Lives in Lisbon" in on["api"] and "Plays the cello" in on["api"]
    assert on["api_count"] == 2 and on["chat"] == 2 and on["search"] == 2
    assert "Lives in Lisbon" in on["api_q"] and "Lives in Lisbon" in on["reader"]
    bob_before = await prompts(api, settings, "bob")

    assert (await consent_cli(settings, "disable", "ada"))["enabled"] is False
    assert await get(api, "ada", "consent") == {"enabled": False, "chosen": True}
    assert await prompts(api, settings, "ada") == {
        "api": "", "api_count": 0, "api_q": "", "chat": 0, "reader": "", "search": 0}
    # The user's own memory API still shows what is kept, until they forget it.
    assert await own_view(api, "ada") == sorted(ADA)
    export = await api.get("/users/ada/export", headers=bearer("ada"))
    assert export.status_code == 200
    assert sorted(f["text"] for f in export.json()["facts"]) == sorted(ADA)
    # Another user's prompts are untouched.
    assert await prompts(api, settings, "bob") == bob_before
    assert "Lives in Porto" in bob_before["api"]

    resp = await api.put("/users/ada/consent", json={"enabled": True}, headers=bearer("ada"))
    assert resp.status_code == 200, resp.text
    assert await prompts(api, settings, "ada") == on

    # Forgotten: the facts are gone for good, from the prompts and the user's view alike.
    resp = await api.put("/users/ada/consent", json={"enabled": False, "forget": True},
                         headers=bearer("ada"))
    assert resp.status_code == 200 and resp.json()["deleted"]["memory_fact"] == 2
    assert await own_view(api, "ada") == []
    assert (await prompts(api, settings, "ada"))["api"] == ""
    assert await get(api, "ada", "consent") == {"enabled": False, "chosen": True}


async def test_a_user_who_never_chose_follows_the_fleets_default(
    api: httpx.AsyncClient, settings: Settings
) -> None:
    resp = await api.post("/users/cy/facts", json={"text": "Lives in Braga"},
                          headers=bearer("cy"))
    assert resp.status_code == 201, resp.text
    off_by_default = settings.model_copy(update={"memory_default": False})
    async with open_reader(off_by_default) as reader:
        assert await reader.known_facts_block("cy") == ""
    async with open_reader(settings) as reader:
        assert "Lives in Braga" in await reader.known_facts_block("cy")
