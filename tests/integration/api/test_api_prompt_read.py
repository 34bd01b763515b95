"""The prompt read over HTTP with a read key, the embeddings on the OpenAI-compatible
stub: a user with at most read_top_k facts gets them all with no embeddings call (the
block the same as without a query), a user with more gets the top k with one; both
reads, and search, say in Server-Timing where their time went, without user content."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest

from api_stub.llm_stub import EMBED_PATH, StubServer
from tests.api_server import api_settings, new_key, running_api
from tests.helpers import fences_for_tests
from tests.integration.api.conftest import key_auth
from tests.openai_stub import openai_settings
from worker.api.read_timing import HEADER
from worker.config import Settings
from worker.providers.hashing import HashingEmbedder
from worker.store.postgres import PostgresStore
from worker.store.service_keys import ServiceKeyStore
from worker.store.types import NewFact

TOP_K = 3
FACTS = ["Lives in Lisbon", "Plays the cello", "Keeps bees on the roof", "Works as a nurse",
         "Allergic to peanuts"]
QUERY = "where does the cello player live"
METRIC = re.compile(r"^(embed|store|total);dur=\d+\.\d\d$")


@pytest.fixture
async def read_api(settings: Settings, stub: StubServer) -> AsyncIterator[httpx.AsyncClient]:
    """The API with its embeddings on the stub and a read_top_k of 3."""
    served = api_settings(openai_settings(settings, stub, read_top_k=TOP_K))
    async with running_api(served) as base_url, \
            httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        yield client


async def remember(settings: Settings, user_id: str, texts: list[str]) -> None:
    """Facts written through the store, embedded as the stub embeds (the hashing
    embedder) and labelled with the API's embedding model, as the worker writes them."""
    vectors = (await HashingEmbedder(settings.embed_dim).embed(texts)).value
    store = await PostgresStore.connect(settings.database_url or "", fences=fences_for_tests())
    try:
        for text, vector in zip(texts, vectors, strict=True):
            await store.add_fact(user_id, NewFact(text, "fact", 5, vector, settings.embed_model))
    finally:
        await store.aclose()


def timing(resp: httpx.Response) -> dict[str, float]:
    """The Server-Timing metrics, checked to be durations and nothing else."""
    metrics = [part.strip() for part in resp.headers[HEADER].split(",")]
    assert all(METRIC.match(m) for m in metrics), metrics
    return {m.split(";")[0]: float(m.split("=")[1]) for m in metrics}


def embeddings_calls(stub: StubServer) -> int:
    return sum(r["path"] == EMBED_PATH for r in stub.recorded())


async def test_a_user_with_at_most_top_k_facts_gets_them_all_without_an_embeddings_call(
    read_api: httpx.AsyncClient, settings: Settings, stub: StubServer, keys: ServiceKeyStore,
) -> None:
    await remember(settings, "ada", FACTS[:TOP_K])
    read = key_auth(await new_key(keys, "read"))
    stub.reset()
    asked = await read_api.get("/users/ada/known-facts", params={"q": QUERY}, headers=read)
    assert asked.status_code == 200, asked.text
    assert embeddings_calls(stub) == 0, "few facts: the query goes to no model"
    plain = await read_api.get("/users/ada/known-facts", headers=read)
    assert asked.json() == plain.json()  # the block the read gives without a query
    assert asked.json()["count"] == TOP_K
    assert sorted(line.split("] ")[1].rsplit(" (", 1)[0]
                  for line in asked.json()["block"].splitlines()[1:]) == sorted(FACTS[:TOP_K])
    spans = timing(asked)
    assert set(spans) == {"store", "total"}  # no model call, no embed metric
    assert 0 < spans["store"] <= spans["total"]


async def test_a_user_with_more_facts_gets_the_top_k_with_one_embeddings_call(
    read_api: httpx.AsyncClient, settings: Settings, stub: StubServer, keys: ServiceKeyStore,
) -> None:
    await remember(settings, "bob", FACTS)
    read = key_auth(await new_key(keys, "read"))
    stub.reset()
    asked = await read_api.get("/users/bob/known-facts", params={"q": QUERY}, headers=read)
    assert asked.status_code == 200, asked.text
    assert embeddings_calls(stub) == 1
    assert asked.json()["count"] == TOP_K
    assert "Plays the cello" in asked.json()["block"]  # its words and its meaning match
    spans = timing(asked)
    assert set(spans) == {"embed", "store", "total"}
    assert spans["embed"] > 0 and spans["embed"] + spans["store"] <= spans["total"] + 0.01
    header = asked.headers[HEADER].lower()
    assert not any(word in header for word in ("cello", "lisbon", "bob", "where"))

    # No query: the newest top_k, with no model call.
    plain = await read_api.get("/users/bob/known-facts", headers=read)
    assert plain.json()["count"] == TOP_K and embeddings_calls(stub) == 1
    assert set(timing(plain)) == {"store", "total"}

    found = await read_api.get("/users/bob/search", params={"q": QUERY, "k": 2}, headers=read)
    assert found.status_code == 200 and len(found.json()["results"]) == 2
    assert embeddings_calls(stub) == 2
    assert set(timing(found)) == {"embed", "store", "total"}


async def test_the_embeddings_call_is_timed_apart_from_the_store(
    read_api: httpx.AsyncClient, settings: Settings, stub: StubServer, keys: ServiceKeyStore,
) -> None:
    await remember(settings, "cy", FACTS)
    read = key_auth(await new_key(keys, "read"))
    stub.reset()
    stub.add_fault("latency_ms", latency_ms=150, path=EMBED_PATH)
    asked = await read_api.get("/users/cy/known-facts", params={"q": QUERY}, headers=read)
    assert asked.status_code == 200, asked.text
    spans = timing(asked)
    assert spans["embed"] >= 150 and spans["store"] < 150 and spans["total"] >= 150
