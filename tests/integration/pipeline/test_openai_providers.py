"""The openai providers over real HTTP, with the official client, against the LLM stub.

One stub server per module on a free loopback port; each test resets it. The
stub answers with the rules provider, so every expected value is computable
here, and it records each request body so the wire format can be checked
exactly as sent.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import urllib.error
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime
from typing import Any

import numpy as np
import openai
import pytest

from api_stub import llm_stub
from api_stub.llm_answers import FOREIGN_ID
from api_stub.llm_stub import CHAT_PATH, EMBED_PATH, StubServer
from tests.helpers import active_texts, bot_msg, drain, user_msg
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.errors import (
    ConfigurationError,
    ProviderAnswerInvalid,
    ProviderError,
    ProviderUnavailable,
)
from worker.pipeline import decisions
from worker.pipeline.extract import CandidateFact
from worker.protection.retry import RetryPolicy
from worker.providers.base import Providers
from worker.providers.factory import PLACEHOLDER_KEY, build_providers, endpoint
from worker.providers.hashing import HashingEmbedder, hash_embed
from worker.providers.llm_json import strict_schema
from worker.providers.openai_chat import (
    ChatOptions,
    OpenAIConsolidator,
    OpenAIExtractor,
    OpenAISummarizer,
    StructuredOutput,
)
from worker.providers.openai_embed import EmbedOptions, OpenAIEmbedder
from worker.providers.prompts import (
    ATTRIBUTED_EXTRACTION_PROMPT,
    CONSOLIDATION_PROMPT,
    EXTRACTION_PROMPT,
    SUMMARY_PROMPT,
)
from worker.providers.rules import decide, extract_facts, summarize
from worker.providers.wire import (
    AskedAttributed,
    AskedConsolidation,
    AskedExtraction,
    ConsolidationRequest,
    ExtractionRequest,
    KnownPerson,
    SummaryAnswer,
    SummaryRequest,
    WireMessage,
)
from worker.store.types import NeighborRow

DIM = 64
KEY = "sk-test"
PRIVATE_TEXT = "I live in Lyon"

EXTRACTION = ExtractionRequest(
    observed_at="2026-11-22 (Sunday)",
    summary="The user talked about moving.",
    context=(WireMessage(role="assistant", content="Where do you live now?"),),
    messages=(
        WireMessage(role="user", content=f"{PRIVATE_TEXT}. I love green tea."),
        WireMessage(role="assistant", content="Noted!"),
    ),
)
SUMMARY = SummaryRequest(
    observed_at="2026-11-22 (Sunday)", previous_summary=None, messages=EXTRACTION.messages
)


def _prepared() -> decisions.PreparedRequest:
    candidates = [
        CandidateFact("Lives in Lyon", "fact", 8),
        CandidateFact("Likes green tea", "preference", 5),
    ]
    embeddings = np.asarray([hash_embed(c.text, DIM) for c in candidates], dtype=np.float32)
    when = datetime(2026, 10, 1)
    neighbors = [
        [NeighborRow(4711, "Lives in Paris", when, 0.2)],
        [NeighborRow(4712, "Likes green tea", when, 0.0), NeighborRow(4711, "Lives in Paris",
                                                                       when, 0.9)],
    ]
    return decisions.build_request(
        candidates, embeddings, neighbors, "2026-11-22 (Sunday)", "2026-11-22", 5
    )


CONSOLIDATION: ConsolidationRequest = _prepared().request


class Sleeps:
    """The injected sleep: records each wait; really waits only when asked to."""

    def __init__(self, real: bool = False) -> None:
        self.waits: list[float] = []
        self.real = real

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.real:
            await asyncio.sleep(seconds)


@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    with StubServer(dim=DIM) as server:
        yield server


@pytest.fixture(autouse=True)
def fresh(stub: StubServer) -> None:
    stub.reset()


Make = Callable[..., Any]


@pytest.fixture
async def make(stub: StubServer) -> AsyncIterator[Make]:
    made: list[Any] = []

    def build(kind: type[Any], sleep: Sleeps | None = None, **options: Any) -> Any:
        if kind is OpenAIEmbedder:
            defaults: dict[str, Any] = {"model": "text-embedding-3-small", "dim": DIM}
            opts: Any = EmbedOptions(base_url=stub.v1, api_key=KEY, **{**defaults, **options})
        else:
            options.setdefault("retry", RetryPolicy(max_attempts=3))
            opts = ChatOptions(base_url=stub.v1, api_key=KEY, model="stub-model", **options)
        provider = kind(opts, sleep=sleep or Sleeps())
        made.append(provider)
        return provider

    yield build
    for provider in made:
        await provider.aclose()


def _chat_requests(stub: StubServer) -> list[dict[str, Any]]:
    return [r for r in stub.recorded() if r["path"] == CHAT_PATH]


def _assert_wire(body: dict[str, Any], prompt: str, request: Any) -> None:
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == prompt
    assert type(request).model_validate_json(messages[1]["content"]) == request
    assert body["model"] == "stub-model"
    assert body["temperature"] == 0


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("mode", ["json_schema", "json_object"])
async def test_extraction_round_trip(stub: StubServer, make: Make, mode: StructuredOutput) -> None:
    if mode == "json_object":
        stub.add_fault("prose")  # what schema-less servers send back
    answer = await make(OpenAIExtractor, structured_output=mode).extract(EXTRACTION)
    assert answer.value == extract_facts(EXTRACTION)
    assert answer.value.facts  # the rules found something to compare
    assert answer.model == "stub-model"
    assert answer.usage.input_tokens > 0 and answer.usage.output_tokens > 0

    [recorded] = _chat_requests(stub)
    body = recorded["body"]
    _assert_wire(body, EXTRACTION_PROMPT, EXTRACTION)
    assert recorded["authorization"] == f"Bearer {KEY}"
    if mode == "json_schema":
        # Persons off (no "people"): the schema as before persons, without "about".
        assert body["response_format"] == {"type": "json_schema", "json_schema": {
            "name": "fact_extraction", "strict": True, "schema": strict_schema(AskedExtraction)}}
    else:
        assert body["response_format"] == {"type": "json_object"}


async def test_an_extraction_with_people_asks_who_each_fact_is_about(
    stub: StubServer, make: Make
) -> None:
    # Persons on (docs/persons.md): the request lists the known persons, the prompt says
    # how to attribute, and the schema has "about"; the answer names the person.
    request = EXTRACTION.model_copy(update={
        "people": (KnownPerson(name="Ana", relation="sister"),),
        "messages": (WireMessage(role="user", content="My sister Ana is vegetarian."),)})
    answer = await make(OpenAIExtractor).extract(request)
    (fact,) = answer.value.facts
    assert fact.about is not None and (fact.about.name, fact.about.relation) == ("Ana", "sister")
    [recorded] = _chat_requests(stub)
    body = recorded["body"]
    _assert_wire(body, ATTRIBUTED_EXTRACTION_PROMPT, request)
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema == strict_schema(AskedAttributed)  # persons on, notes off
    assert "about" in schema["properties"]["facts"]["items"]["required"]


@pytest.mark.parametrize("mode", ["json_schema", "json_object"])
async def test_consolidation_round_trip(
    stub: StubServer, make: Make, mode: StructuredOutput
) -> None:
    if mode == "json_object":
        stub.add_fault("prose")
    answer = await make(OpenAIConsolidator, structured_output=mode).consolidate(CONSOLIDATION)
    assert answer.value == decide(CONSOLIDATION)
    assert {d.event for d in answer.value.decisions} == {"UPDATE", "NONE"}
    [recorded] = _chat_requests(stub)
    _assert_wire(recorded["body"], CONSOLIDATION_PROMPT, CONSOLIDATION)
    fmt = recorded["body"]["response_format"]
    if mode == "json_schema":
        assert fmt["json_schema"]["name"] == "memory_consolidation"
        assert fmt["json_schema"]["schema"] == strict_schema(AskedConsolidation)
        decision = fmt["json_schema"]["schema"]["properties"]["decisions"]["items"]
        assert decision["required"] == ["candidate", "event", "target"], "no text asked"


async def test_summary_round_trip(stub: StubServer, make: Make) -> None:
    answer = await make(OpenAISummarizer).summarize(SUMMARY)
    assert answer.value == summarize(SUMMARY)
    [recorded] = _chat_requests(stub)
    _assert_wire(recorded["body"], SUMMARY_PROMPT, SUMMARY)
    assert recorded["body"]["response_format"]["json_schema"]["schema"] == strict_schema(
        SummaryAnswer
    )


async def test_a_server_without_schemas_is_told_apart_and_json_object_works(
    stub: StubServer, make: Make
) -> None:
    stub.configure(reject_json_schema=True)
    with pytest.raises(ProviderError, match="STRUCTURED_OUTPUT=json_object") as caught:
        await make(OpenAIExtractor).extract(EXTRACTION)
    assert not isinstance(caught.value, ProviderUnavailable)
    assert len(_chat_requests(stub)) == 1  # a 400 is not retried
    answer = await make(OpenAIExtractor, structured_output="json_object").extract(EXTRACTION)
    assert answer.value == extract_facts(EXTRACTION)


# ---------------------------------------------------------------- HTTP faults


async def test_429_with_retry_after_is_honoured(stub: StubServer, make: Make) -> None:
    stub.add_fault("429", retry_after=1)
    sleeps = Sleeps(real=True)
    answer = await make(OpenAIExtractor, sleep=sleeps).extract(EXTRACTION)
    assert answer.value == extract_facts(EXTRACTION)
    assert len(sleeps.waits) == 1 and 1.0 <= sleeps.waits[0] <= 1.1
    first, second = _chat_requests(stub)
    assert second["at"] - first["at"] >= 0.95  # the server saw the wait, not just the test
    assert second["body"] == first["body"]


async def test_retry_after_ms_is_honoured(stub: StubServer, make: Make) -> None:
    stub.add_fault("429", count=2, retry_after_ms=150)
    sleeps = Sleeps()
    await make(OpenAIConsolidator, sleep=sleeps).consolidate(CONSOLIDATION)
    # The server's 150 ms, plus at most the 10 % spread of the default policy.
    assert len(sleeps.waits) == 2 and all(0.15 <= w <= 0.165 for w in sleeps.waits)
    assert len(_chat_requests(stub)) == 3


async def test_500_then_success(stub: StubServer, make: Make) -> None:
    stub.add_fault("500")
    sleeps = Sleeps()
    answer = await make(OpenAIExtractor, sleep=sleeps).extract(EXTRACTION)
    assert answer.value == extract_facts(EXTRACTION)
    assert len(sleeps.waits) == 1
    assert len(_chat_requests(stub)) == 2


async def test_persistent_500_is_unavailable_after_the_bounded_tries(
    stub: StubServer, make: Make
) -> None:
    stub.add_fault("503", count=50)
    sleeps = Sleeps()
    with pytest.raises(ProviderUnavailable, match="HTTP 503") as caught:
        await make(OpenAIExtractor, sleep=sleeps,
                   retry=RetryPolicy(max_attempts=4)).extract(EXTRACTION)
    assert len(_chat_requests(stub)) == 4
    assert len(sleeps.waits) == 3
    assert isinstance(caught.value.__cause__, openai.APIStatusError)


async def test_a_timeout_is_retried(stub: StubServer, make: Make) -> None:
    # A timeout the second (prompt) answer meets even on a loaded machine.
    stub.add_fault("timeout", sleep_s=10)
    answer = await make(OpenAIExtractor, timeout_s=1.5).extract(EXTRACTION)
    assert answer.value == extract_facts(EXTRACTION)
    assert len(_chat_requests(stub)) == 2


async def test_a_refused_key_is_a_configuration_error_at_once(
    stub: StubServer, make: Make
) -> None:
    stub.add_fault("401", count=10)
    with pytest.raises(ConfigurationError, match="API key"):
        await make(OpenAIExtractor).extract(EXTRACTION)
    assert len(_chat_requests(stub)) == 1


async def test_an_unreachable_endpoint_is_unavailable() -> None:
    sleeps = Sleeps()
    # Port 9 (discard) on loopback: nothing listens, the connection is refused.
    provider = OpenAIExtractor(
        ChatOptions(base_url="http://127.0.0.1:9/v1", api_key=KEY, model="m",
                    retry=RetryPolicy(max_attempts=2)),
        sleep=sleeps,
    )
    try:
        with pytest.raises(ProviderUnavailable, match="connection"):
            await provider.extract(EXTRACTION)
    finally:
        await provider.aclose()
    assert len(sleeps.waits) == 1


# ---------------------------------------------------------------- bad answers


@pytest.mark.parametrize("mode", ["truncated", "schema_break"])
async def test_a_bad_answer_is_asked_again(stub: StubServer, make: Make, mode: str) -> None:
    stub.add_fault(mode)
    answer = await make(OpenAIExtractor).extract(EXTRACTION)
    assert answer.value == extract_facts(EXTRACTION)
    first, second = _chat_requests(stub)
    assert first["body"] == second["body"]  # the same question, unchanged
    once = await make(OpenAIExtractor).extract(EXTRACTION)
    # Usage covers both asks: the input was sent twice.
    assert answer.usage.input_tokens == 2 * once.usage.input_tokens


@pytest.mark.parametrize("mode", ["truncated", "schema_break"])
async def test_a_persistently_bad_answer_is_invalid(
    stub: StubServer, make: Make, mode: str
) -> None:
    stub.add_fault(mode, count=10)
    with pytest.raises(ProviderAnswerInvalid, match="3 answer") as caught:
        await make(OpenAIExtractor, answer_attempts=3).extract(EXTRACTION)
    assert PRIVATE_TEXT not in str(caught.value) and "Lyon" not in str(caught.value)
    assert len(_chat_requests(stub)) == 3


async def test_a_runaway_extraction_keeps_its_complete_facts_in_one_call(
    stub: StubServer, make: Make
) -> None:
    # Cut at the token limit (finish reason "length"), its facts repeated: asked again
    # unchanged at temperature 0 a small model runs away the same way (issue 38), so
    # the complete facts are kept, each once, and counted as a cut_off.
    stub.add_fault("runaway", count=10, path=CHAT_PATH)
    kinds: list[str] = []
    answer = await make(OpenAIExtractor, retry=RetryPolicy(on_failure=kinds.append)).extract(
        EXTRACTION)
    assert answer.value == extract_facts(EXTRACTION) and answer.value.facts
    assert kinds == ["cut_off"] and len(_chat_requests(stub)) == 1


async def test_a_cut_off_answer_with_no_complete_fact_is_asked_again(
    stub: StubServer, make: Make
) -> None:
    stub.add_fault("runaway", count=1, path=CHAT_PATH, task="fact_extraction")
    empty = EXTRACTION.model_copy(update={"messages": (WireMessage(role="user", content="ok"),)})
    assert not extract_facts(empty).facts  # nothing to repeat: it runs away in a fact
    kinds: list[str] = []
    answer = await make(OpenAIExtractor, retry=RetryPolicy(on_failure=kinds.append)).extract(
        empty)
    assert answer.value == extract_facts(empty)
    assert kinds == ["invalid_answer"] and len(_chat_requests(stub)) == 2


async def test_a_cut_off_consolidation_is_never_salvaged(stub: StubServer, make: Make) -> None:
    # Its decisions do not stand alone: a cut one would leave candidates undecided.
    stub.add_fault("runaway", count=10, path=CHAT_PATH)
    with pytest.raises(ProviderAnswerInvalid, match="cut off"):
        await make(OpenAIConsolidator, answer_attempts=2).consolidate(CONSOLIDATION)
    assert len(_chat_requests(stub)) == 2


async def test_a_body_that_is_not_a_chat_completion_is_asked_again(
    stub: StubServer, make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    # memfleet reads the body itself (the client's objects are not built): a body of the
    # wrong shape is an unusable answer like a broken one, asked again, never a crash.
    real = llm_stub._completion
    bad = iter([{"choices": "not a list", "model": "m"}])
    monkeypatch.setattr(llm_stub, "_completion", lambda *args: next(bad, None) or real(*args))
    kinds: list[str] = []
    answer = await make(OpenAIExtractor, retry=RetryPolicy(on_failure=kinds.append)).extract(
        EXTRACTION)
    assert answer.value == extract_facts(EXTRACTION)
    assert kinds == ["invalid_answer"] and len(_chat_requests(stub)) == 2


async def test_a_body_never_a_chat_completion_is_invalid_without_quoting_it(
    stub: StubServer, make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {"choices": [{"message": PRIVATE_TEXT, "finish_reason": "stop"}]}
    monkeypatch.setattr(llm_stub, "_completion", lambda *args: body)
    with pytest.raises(ProviderAnswerInvalid, match="not a chat completion") as caught:
        await make(OpenAIExtractor).extract(EXTRACTION)
    assert PRIVATE_TEXT not in str(caught.value) and caught.value.__cause__ is None


async def test_a_completion_without_usage_or_model_is_read(
    stub: StubServer, make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = llm_stub._completion

    def bare(*args: Any) -> dict[str, Any]:
        full = real(*args)
        return {"choices": [{"message": {"content": full["choices"][0]["message"]["content"]}}]}

    monkeypatch.setattr(llm_stub, "_completion", bare)
    answer = await make(OpenAIExtractor).extract(EXTRACTION)
    assert answer.value == extract_facts(EXTRACTION)
    assert answer.model == "stub-model" and answer.usage.input_tokens == 0


async def test_unknown_ids_pass_through_and_are_rejected_by_validation(
    stub: StubServer, make: Make
) -> None:
    stub.add_fault("unknown_ids")
    prepared = _prepared()
    answer = await make(OpenAIConsolidator).consolidate(prepared.request)
    targets = {d.target for d in answer.value.decisions}
    assert FOREIGN_ID in targets
    validated = decisions.validate(prepared, answer.value)
    assert validated.decisions == {} and validated.rejected == 2


# ---------------------------------------------------------------- embeddings


async def test_embeddings_one_call_unit_vectors_in_order(stub: StubServer, make: Make) -> None:
    texts = ["Lives in Lyon", "Likes green tea", "   "]
    answer = await make(OpenAIEmbedder).embed(texts)
    assert answer.value.dtype == np.float32 and answer.value.shape == (3, DIM)
    for text, vector in zip(texts, answer.value, strict=True):
        assert math.isclose(float(np.dot(vector, vector)), 1.0, rel_tol=1e-6)
        expected = hash_embed(text if text.strip() else " ", DIM)
        np.testing.assert_allclose(vector, expected, rtol=0, atol=1e-7)
    assert answer.usage.input_tokens > 0
    [recorded] = stub.recorded()
    assert recorded["path"] == EMBED_PATH
    assert recorded["body"]["input"] == ["Lives in Lyon", "Likes green tea", " "]
    assert recorded["body"]["dimensions"] == DIM
    # base64 float32: a tenth of the bytes of a list of floats, decoded by numpy.
    assert recorded["body"]["encoding_format"] == "base64"


async def test_embeddings_from_a_server_that_ignores_base64_are_read(
    stub: StubServer, make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stub runs in this process: this makes it answer lists of floats whatever is asked,
    # as servers without base64 support do.
    monkeypatch.setattr(llm_stub, "_encoded",
                        lambda texts, dim, encoding: [hash_embed(t, dim) for t in texts])
    answer = await make(OpenAIEmbedder).embed(["Lives in Lyon", "Likes green tea"])
    expected = np.asarray([hash_embed(t, DIM) for t in ["Lives in Lyon", "Likes green tea"]])
    np.testing.assert_allclose(answer.value, expected, rtol=0, atol=1e-7)
    [recorded] = stub.recorded()
    assert recorded["body"]["encoding_format"] == "base64"


def test_the_stub_serves_base64_float32(stub: StubServer) -> None:
    body = {"input": ["Lives in Lyon", "x"], "model": "m", "encoding_format": "base64"}
    answer = stub.control("POST", EMBED_PATH, body)
    for text, item in zip(body["input"], answer["data"], strict=True):
        decoded = np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4")
        np.testing.assert_array_equal(decoded, np.asarray(hash_embed(text, DIM), dtype="<f4"))
    floats = stub.control("POST", EMBED_PATH, {**body, "encoding_format": "float"})
    assert floats["data"][0]["embedding"] == hash_embed("Lives in Lyon", DIM)


async def test_an_embeddings_answer_that_is_not_a_list_is_invalid(
    stub: StubServer, make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llm_stub, "_encoded", lambda texts, dim, encoding: [
        {"values": hash_embed(t, dim)} for t in texts])
    with pytest.raises(ProviderAnswerInvalid, match="not an embeddings list"):
        await make(OpenAIEmbedder).embed(["a"])


async def test_embeddings_dimensions_only_for_models_that_take_it(
    stub: StubServer, make: Make
) -> None:
    await make(OpenAIEmbedder, model="nomic-embed-text").embed(["a"])
    await make(OpenAIEmbedder, model="nomic-embed-text", send_dimensions=True).embed(["a"])
    first, second = stub.recorded()
    assert "dimensions" not in first["body"]
    assert second["body"]["dimensions"] == DIM


async def test_embeddings_with_no_texts_make_no_call(stub: StubServer, make: Make) -> None:
    assert (await make(OpenAIEmbedder).embed([])).value.shape == (0, DIM)
    assert stub.recorded() == []


async def test_embeddings_count_and_dimension_are_checked(stub: StubServer, make: Make) -> None:
    stub.add_fault("wrong_count")
    with pytest.raises(ProviderAnswerInvalid, match="1 vectors for 2"):
        await make(OpenAIEmbedder).embed(["a", "b"])
    stub.add_fault("wrong_dim")
    with pytest.raises(ConfigurationError, match="EMBED_DIM"):
        await make(OpenAIEmbedder).embed(["a", "b"])


async def test_embeddings_retry_like_chat(stub: StubServer, make: Make) -> None:
    stub.add_fault("502", path=EMBED_PATH)
    sleeps = Sleeps()
    answer = await make(OpenAIEmbedder, sleep=sleeps).embed(["a"])
    assert len(answer.value) == 1 and len(sleeps.waits) == 1


# ---------------------------------------------------------------- the factory


def _settings(**values: Any) -> Settings:
    return Settings(database_url="postgresql://unused", redis_url="redis://unused", **values)


async def test_factory_builds_openai_chat_over_a_local_server_without_key(
    stub: StubServer,
) -> None:
    providers: Providers = build_providers(_settings(
        llm_provider="openai", llm_base_url=stub.v1, embed_provider="hashing", embed_dim=DIM,
        summary_model=None, extract_model="extract-m", consolidate_model="consolidate-m",
    ))
    try:
        assert isinstance(providers.extractor, OpenAIExtractor)
        assert isinstance(providers.consolidator, OpenAIConsolidator)
        assert isinstance(providers.summarizer, OpenAISummarizer)
        assert isinstance(providers.embedder, HashingEmbedder)  # a mix is allowed
        assert providers.summarizer.model == "extract-m"
        await providers.extractor.extract(EXTRACTION)
        await providers.consolidator.consolidate(CONSOLIDATION)
    finally:
        await providers.aclose()
    first, second = _chat_requests(stub)
    assert first["authorization"] == f"Bearer {PLACEHOLDER_KEY}"
    assert (first["body"]["model"], second["body"]["model"]) == ("extract-m", "consolidate-m")


async def test_factory_builds_openai_embeddings(stub: StubServer) -> None:
    providers = build_providers(_settings(
        embed_provider="openai", embed_base_url=stub.v1, embed_api_key="ek", embed_dim=DIM,
    ))
    try:
        assert isinstance(providers.embedder, OpenAIEmbedder)
        assert len((await providers.embedder.embed(["x"])).value[0]) == DIM
    finally:
        await providers.aclose()
    assert stub.recorded()[0]["authorization"] == "Bearer ek"


def _client_of(provider: Any) -> Any:
    return provider._client


async def test_providers_of_one_endpoint_share_one_client(stub: StubServer) -> None:
    # One pool of connections for all of a job's calls: after an idle pause (httpx drops
    # a connection idle for 5 s) a job reopens one connection, not one per provider.
    providers = build_providers(_settings(
        llm_provider="openai", llm_base_url=stub.v1, embed_provider="openai", embed_dim=DIM,
    ))
    clients = {id(_client_of(p)) for p in (providers.extractor, providers.consolidator,
                                           providers.summarizer, providers.embedder)}
    client = _client_of(providers.embedder)
    try:
        assert len(clients) == 1
        assert (await providers.extractor.extract(EXTRACTION)).value.facts
        assert len((await providers.embedder.embed(["x"])).value[0]) == DIM
        await providers.summarizer.aclose()  # one provider letting go closes nothing
        assert not client.is_closed()
        await providers.summarizer.aclose()  # nor does it twice
        assert len((await providers.embedder.embed(["y"])).value[0]) == DIM
    finally:
        await providers.aclose()
    assert client.is_closed()


async def test_each_provider_keeps_its_own_timeout_on_a_shared_client(stub: StubServer) -> None:
    providers = build_providers(_settings(
        llm_provider="openai", llm_base_url=stub.v1, llm_timeout_s=30, embed_provider="openai",
        embed_dim=DIM, embed_timeout_s=0.3, llm_max_attempts=1,
    ))
    try:
        stub.add_fault("timeout", sleep_s=3, path=EMBED_PATH)
        with pytest.raises(ProviderUnavailable, match="timeout"):
            await asyncio.wait_for(providers.embedder.embed(["x"]), 2)
        stub.add_fault("latency_ms", latency_ms=500, path=CHAT_PATH)
        assert (await providers.extractor.extract(EXTRACTION)).value.facts
    finally:
        await providers.aclose()


def test_factory_providers_of_two_endpoints_have_two_clients(stub: StubServer) -> None:
    providers = build_providers(_settings(
        llm_provider="openai", llm_base_url=stub.v1, embed_provider="openai", embed_dim=DIM,
        embed_base_url=stub.url + "/other/v1",
    ))
    try:
        assert _client_of(providers.extractor) is not _client_of(providers.embedder)
        assert _client_of(providers.extractor) is _client_of(providers.consolidator)
    finally:
        asyncio.run(providers.aclose())


def test_factory_fails_loudly_without_an_endpoint() -> None:
    with pytest.raises(ConfigurationError, match="MEMFLEET_LLM_BASE_URL"):
        endpoint(None, None, "MEMFLEET_LLM")
    assert endpoint(None, "k", "X") == ("https://api.openai.com/v1", "k")
    assert endpoint("http://local/v1", None, "X") == ("http://local/v1", PLACEHOLDER_KEY)
    unchecked = Settings.model_construct(llm_provider="openai", llm_base_url=None,
                                         llm_api_key=None)
    with pytest.raises(ConfigurationError):
        build_providers(unchecked)


def test_factory_rejects_an_empty_model_name(stub: StubServer) -> None:
    with pytest.raises(ConfigurationError, match="model name"):
        build_providers(_settings(llm_provider="openai", llm_base_url=stub.v1,
                                  consolidate_model=" "))


def test_rules_and_hashing_stay_the_default() -> None:
    providers = build_providers(_settings(llm_provider="rules", embed_provider="hashing",
                                          embed_dim=DIM))
    assert isinstance(providers.embedder, HashingEmbedder)
    assert not isinstance(providers.extractor, OpenAIExtractor)


def test_stub_control_api_rejects_unknown_faults(stub: StubServer) -> None:
    with pytest.raises(urllib.error.HTTPError):
        stub.add_fault("explode")
    assert stub.control("GET", "/_stub/faults") == {"faults": []}
    stub.add_fault("500", count=2, path=CHAT_PATH)
    assert json.dumps(stub.control("GET", "/_stub/faults")["faults"][0]["count"]) == "2"



# ---------------------------------------------------------------- the whole write path


async def test_the_pipeline_runs_on_the_openai_providers(
    stub: StubServer, settings: Settings, redis: Any, db: Any
) -> None:
    over_http = settings.model_copy(update={
        "llm_provider": "openai", "llm_base_url": stub.v1, "llm_api_key": None,
        "embed_provider": "openai", "embed_base_url": stub.v1, "embed_api_key": None,
        "embed_model": "text-embedding-3-small",
    })
    convo = [user_msg("Hi! I live in Berlin."), bot_msg("Nice."),
             user_msg("For my side project I use Postgres.")]
    await schedule_memory_persistence(redis, "s1", "dana", convo,
                                      queue_name=over_http.queue_name)
    await drain(over_http)
    convo += [bot_msg("Great choice."), user_msg("We switched from Postgres to SQLite.")]
    await schedule_memory_persistence(redis, "s1", "dana", convo,
                                      queue_name=over_http.queue_name)
    await drain(over_http)
    assert sorted(await active_texts(db, "dana")) == ["Lives in Berlin", "Uses SQLite"]
    paths = [r["path"] for r in stub.recorded()]
    tasks = [json.loads(r["body"]["messages"][1]["content"])["task"]
             for r in stub.recorded() if r["path"] == CHAT_PATH]
    assert paths.count(EMBED_PATH) == 2  # one embeddings call per job
    assert tasks.count("fact_extraction") == 2 and tasks.count("memory_consolidation") == 2
