"""End to end: conversations handed over to a real worker (the real `openai` client on
the LLM stub) hold a change of a pinned fact; the user answers it through the memory
API, and the chain and the facts list show what they chose."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.api_server import bearer
from tests.helpers import bot_msg, drain, user_msg
from tests.integration.api.test_api_memory_model import listed
from tests.integration.api.test_api_panel_ops import chain, proposals
from tests.openai_stub import openai_settings
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings


@pytest.fixture
def api_fleet(llm: Settings) -> Settings:
    """The API on the workers' settings (the LLM stub's)."""
    return llm


@pytest.fixture
def llm(settings: Settings, stub: StubServer) -> Settings:
    return openai_settings(settings, stub, llm_timeout_s=2.0)


async def say(settings: Settings, redis: Redis, user: str, session: str, text: str) -> None:
    await schedule_memory_persistence(redis, session, user,
                                      [user_msg(text), bot_msg("Noted.")],
                                      queue_name=settings.queue_name)
    counts = await drain(settings)
    assert counts["failed"] == 0, counts


async def fact_of(api: httpx.AsyncClient, user: str, text: str) -> dict[str, Any]:
    resp = await api.get(f"/users/{user}/facts", headers=bearer(user))
    return next(f for g in resp.json()["groups"] for f in g["facts"] if f["text"] == text)


async def test_a_held_move_is_accepted_and_a_later_one_goes_stale_after_an_edit(
    llm: Settings, redis: Redis, api: httpx.AsyncClient
) -> None:
    await say(llm, redis, "ida", "s1", "I live in Paris.")
    paris = await fact_of(api, "ida", "Lives in Paris")
    pinned = await api.put(f"/users/ida/facts/{paris['id']}/pin", headers=bearer("ida"))
    assert pinned.status_code == 200
    await say(llm, redis, "ida", "s2", "I moved to Lisbon.")
    assert await listed(api, "ida") == ["Lives in Paris"], "the pinned fact stands"
    (move,) = await proposals(api, "ida")
    assert (move["fact_id"], move["event"], move["reason"], move["text"], move["session_id"],
            move["stale"]) == (paris["id"], "UPDATE", "pinned", "Lives in Lisbon", "s2", False)

    accepted = await api.post(f"/users/ida/held-proposals/{move['id']}/accept",
                              headers=bearer("ida"))
    assert accepted.status_code == 200, accepted.text
    lisbon = accepted.json()["fact"]
    assert (lisbon["text"], lisbon["pinned"], lisbon["source_session_id"]) == (
        "Lives in Lisbon", True, "s2")
    assert await listed(api, "ida") == ["Lives in Lisbon"]
    assert [(v["text"], v["superseded_reason"]) for v in await chain(api, "ida", paris["id"])] \
        == [("Lives in Paris", "updated"), ("Lives in Lisbon", None)]
    assert await proposals(api, "ida") == []

    # The accepted version is what the next conversation is compared with: still pinned,
    # so the next move is held against it.
    await say(llm, redis, "ida", "s3", "I moved to Porto.")
    (porto,) = await proposals(api, "ida")
    assert (porto["fact_id"], porto["text"]) == (lisbon["id"], "Lives in Porto")
    # The user corrects the fact by hand before answering: the proposal is stale.
    edited = await api.patch(f"/users/ida/facts/{lisbon['id']}", json={"text": "Lives in Braga"},
                             headers=bearer("ida"))
    assert edited.status_code == 200, edited.text
    refused = await api.post(f"/users/ida/held-proposals/{porto['id']}/accept",
                             headers=bearer("ida"))
    assert refused.status_code == 409, refused.text
    assert await listed(api, "ida") == ["Lives in Braga"]
    dismissed = await api.post(f"/users/ida/held-proposals/{porto['id']}/dismiss",
                               headers=bearer("ida"))
    assert dismissed.status_code == 200, dismissed.text
    assert [v["text"] for v in await chain(api, "ida", paris["id"])] == [
        "Lives in Paris", "Lives in Lisbon", "Lives in Braga"]
    assert [(p["text"], p["resolution"]) for p in await proposals(api, "ida", state="all")] \
        == [("Lives in Lisbon", "accepted"), ("Lives in Porto", "dismissed")]
