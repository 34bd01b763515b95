"""The LLM passes over an OpenAI-compatible chat completions endpoint.

Every call sends the pass's system prompt and ONE user message whose content is
the request serialised as JSON (docs/llm_wire.md), and asks for a strict
json_schema answer, or json_object where the server lacks schemas.
HTTP failures are retried in ``retry``; an answer that breaks the schema is
asked for again a bounded number of times, then ProviderAnswerInvalid.

The client sends the request and raises its HTTP errors, but the answer's body
is read once, by memfleet's own model of the few fields it uses: the client's
ChatCompletion objects are not built (docs/bench.md, the real path). The
``response_format`` of each pass is derived once per process.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError

from worker.errors import ProviderAnswerInvalid
from worker.protection.budget import estimate_tokens
from worker.protection.retry import RetryPolicy, Sleep, call_with_retry
from worker.providers.base import Answer, Usage
from worker.providers.http_client import SharedClient, new_client
from worker.providers.llm_json import (
    MAX_ANSWER_CHARS,
    describe_errors,
    json_schema_format,
    parse_answer,
    salvage_items,
)
from worker.providers.prompts import (
    ATTRIBUTED_EXTRACTION_PROMPT,
    ATTRIBUTED_WITH_NOTES_PROMPT,
    CONSOLIDATION_PROMPT,
    EXTRACTION_PROMPT,
    EXTRACTION_WITH_NOTES_PROMPT,
    PORTRAIT_PROMPT,
    PROMOTION_PROMPT,
    SUMMARY_PROMPT,
)
from worker.providers.wire import (
    AskedAttributed,
    AskedConsolidation,
    AskedExtraction,
    AskedWithNotes,
    ConsolidationAnswer,
    ConsolidationRequest,
    ExtractionAnswer,
    ExtractionRequest,
    NotePromotionAnswer,
    NotePromotionRequest,
    PortraitAnswer,
    PortraitRequest,
    SummaryAnswer,
    SummaryRequest,
)

A = TypeVar("A", bound=BaseModel)
StructuredOutput = Literal["json_schema", "json_object"]

_WHAT = "the LLM endpoint"
# What the fleet budget counts for an answer before the server reports its usage:
# room for a long answer, corrected after the call (worker.protection.budget).
ANSWER_ALLOWANCE_TOKENS = 1024
# A completion body above this is refused unread: room for an answer of
# llm_json.MAX_ANSWER_CHARS even with every character JSON-escaped.
MAX_COMPLETION_BYTES = 16 * MAX_ANSWER_CHARS


@dataclass(frozen=True, slots=True)
class ChatOptions:
    """What one chat provider needs; built from Settings by the factory."""

    base_url: str
    api_key: str
    model: str
    structured_output: StructuredOutput = "json_schema"
    timeout_s: float = 60.0
    answer_attempts: int = 2
    temperature: float | None = 0.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)


@dataclass(frozen=True, slots=True)
class ChatPass(Generic[A]):
    """One pass over the chat endpoint: its schema name, prompt and answer model (the
    pipeline's three here; `memfleet eval --qa`'s answer and judge passes in
    worker.eval.qa_openai)."""

    name: str  # the json_schema name (docs/llm_wire.md)
    prompt: str
    answer: type[A]
    # The schema sent, when it asks for less than ``answer`` reads (optional fields left out).
    asked: type[BaseModel] | None = None
    # A cut-off answer's complete items are kept (llm_json.salvage_items): extraction's
    # facts stand alone; consolidation's decisions do not (a cut one leaves candidates).
    salvage_cut_off: bool = False

    @property
    def schema(self) -> type[BaseModel]:
        return self.asked or self.answer


_EXTRACTION = ChatPass("fact_extraction", EXTRACTION_PROMPT, ExtractionAnswer,
                    AskedExtraction, salvage_cut_off=True)
# Persons on (the request names "people"): each fact also says who it is about.
_ATTRIBUTED_EXTRACTION = ChatPass("fact_extraction", ATTRIBUTED_EXTRACTION_PROMPT,
                                  ExtractionAnswer, AskedAttributed, salvage_cut_off=True)
# Notes on (the request has "with_notes", docs/notes.md): the prompt says what a note is,
# and the schema asks for the notes too; with persons or without.
_EXTRACTION_WITH_NOTES = ChatPass("fact_extraction", EXTRACTION_WITH_NOTES_PROMPT,
                                  ExtractionAnswer, AskedWithNotes, salvage_cut_off=True)
_ATTRIBUTED_WITH_NOTES = ChatPass("fact_extraction", ATTRIBUTED_WITH_NOTES_PROMPT,
                                  ExtractionAnswer, salvage_cut_off=True)
_PROMOTION = ChatPass("note_promotion", PROMOTION_PROMPT, NotePromotionAnswer)
_CONSOLIDATION = ChatPass("memory_consolidation", CONSOLIDATION_PROMPT, ConsolidationAnswer,
                       AskedConsolidation)
_SUMMARY = ChatPass("session_summary", SUMMARY_PROMPT, SummaryAnswer)
_PORTRAIT = ChatPass("user_portrait", PORTRAIT_PROMPT, PortraitAnswer)


@functools.cache
def response_format(name: str, answer: type[BaseModel], mode: StructuredOutput) -> dict[str, Any]:
    """Derived once per pass: the schema walk costs more than the rest of the request.

    Shared between calls, so nobody may change the dict; the client only reads it.
    """
    if mode == "json_object":
        return {"type": "json_object"}
    return json_schema_format(name, answer)


def build_messages(prompt: str, request: BaseModel) -> list[dict[str, str]]:
    """System prompt plus one user message: the request as a JSON document."""
    return [
        {"role": "system", "content": prompt},
        {"role": "user", "content": request.model_dump_json()},
    ]


class _Message(BaseModel):
    content: str | None = None
    refusal: str | None = None


class _Choice(BaseModel):
    message: _Message
    finish_reason: str | None = None


class _Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int | None = None


class Completion(BaseModel):
    """The part of a chat completion memfleet reads; anything else is ignored."""

    choices: list[_Choice] = Field(default_factory=list)
    model: str | None = None
    usage: _Usage | None = None


def parse_completion(body: bytes) -> Completion:
    """The answer's body; ProviderAnswerInvalid when it is not a chat completion."""
    if len(body) > MAX_COMPLETION_BYTES:
        raise ProviderAnswerInvalid(
            f"the answer's body is {len(body)} bytes, above the {MAX_COMPLETION_BYTES} read")
    try:
        return Completion.model_validate_json(body)
    except ValidationError as exc:
        # Not chained: the validation error carries the body, which may quote the user.
        raise ProviderAnswerInvalid(
            f"the answer is not a chat completion: {describe_errors(exc)}") from None


def usage_of(response: Completion) -> Usage:
    if response.usage is None:  # some local servers omit it
        return Usage()
    return Usage(response.usage.prompt_tokens, response.usage.completion_tokens)


def request_tokens(messages: list[dict[str, str]]) -> int:
    """The budget's estimate of one call: the messages as sent, and the answer's allowance."""
    return estimate_tokens(sum(len(m["content"]) for m in messages), ANSWER_ALLOWANCE_TOKENS)


def total_tokens(response: Completion) -> int | None:
    return None if response.usage is None else response.usage.total_tokens


def content_of(response: Completion) -> str | None:
    """The answer's text; a refusal, a cut-off or no choice at all counts as invalid."""
    if cut_off(response):
        raise ProviderAnswerInvalid("the answer was cut off at the token limit")
    return response.choices[0].message.content


def cut_off(response: Completion) -> bool:
    """Whether the server cut the answer at its token limit; ProviderAnswerInvalid when
    there is no answer to read (no choice, a refusal)."""
    if not response.choices:
        raise ProviderAnswerInvalid("the answer had no choices")
    choice = response.choices[0]
    if choice.message.refusal:
        raise ProviderAnswerInvalid("the model refused to answer")
    return choice.finish_reason == "length"


def answer_value(spec: ChatPass[A], response: Completion,
                 on_failure: Callable[[str], None] | None = None) -> A:
    """The answer as ``spec.answer``; a cut-off one of a pass that allows it keeps its
    complete items (counted as a ``cut_off`` failure), else ProviderAnswerInvalid."""
    if spec.salvage_cut_off and cut_off(response):
        salvaged = salvage_items(response.choices[0].message.content, spec.answer)
        if salvaged is None:
            raise ProviderAnswerInvalid("the answer was cut off at the token limit")
        if on_failure is not None:
            on_failure("cut_off")
        return salvaged
    return parse_answer(content_of(response), spec.answer)


class OpenAIChat:
    """The base of a chat provider: asks a ``ChatPass`` (``_ask``). A client of its own,
    or one shared with the endpoint's other providers; ``aclose`` lets go of it (a
    shared one closes with its last provider)."""

    provider_name = "openai"

    def __init__(self, options: ChatOptions, *, sleep: Sleep = asyncio.sleep,
                 client: SharedClient | None = None) -> None:
        self._options = options
        self._sleep = sleep
        self._shared = client or SharedClient(
            new_client(options.base_url, options.api_key, options.timeout_s))
        self._client = self._shared.take()
        self._closed = False

    @property
    def model(self) -> str:
        return self._options.model

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._shared.release()

    async def _create(self, messages: list[dict[str, str]], fmt: dict[str, Any]) -> Completion:
        body: dict[str, Any] = {"model": self._options.model, "messages": messages,
                                "response_format": fmt}
        # Some reasoning models refuse any temperature: None leaves it out.
        if self._options.temperature is not None:
            body["temperature"] = self._options.temperature
        # The client's documented raw request: its HTTP, errors and timeouts, without
        # its walk of the body against the typed parameters, which the body (plain
        # dicts of the documented shapes) does not need.
        raw = await self._client.post("/chat/completions", body=body, cast_to=bytes,
                                      options={"timeout": self._options.timeout_s})
        return parse_completion(raw)

    async def _ask(self, spec: ChatPass[A], request: BaseModel) -> Answer[A]:
        messages = build_messages(spec.prompt, request)
        fmt = response_format(spec.name, spec.schema, self._options.structured_output)
        usage = Usage()
        problem = "no attempt"
        tokens = request_tokens(messages)
        for _ in range(self._options.answer_attempts):
            try:
                response = await call_with_retry(
                    lambda: self._create(messages, fmt),
                    self._options.retry,
                    what=_WHAT,
                    sleep=self._sleep,
                    tokens=tokens,
                    used=total_tokens,
                )
                usage += usage_of(response)
                value = answer_value(spec, response, self._options.retry.on_failure)
            except ProviderAnswerInvalid as exc:
                # Asked again unchanged: breaks are mostly sampling or truncation.
                problem = str(exc)
                if self._options.retry.on_failure is not None:
                    self._options.retry.on_failure("invalid_answer")
                continue
            return Answer(value, usage, response.model or self._options.model)
        raise ProviderAnswerInvalid(
            f"{spec.name}: {self._options.answer_attempts} answer(s) unusable; last: {problem}"
        )


class OpenAIExtractor(OpenAIChat):
    async def extract(self, request: ExtractionRequest) -> Answer[ExtractionAnswer]:
        if request.with_notes:
            spec = _EXTRACTION_WITH_NOTES if request.people is None else _ATTRIBUTED_WITH_NOTES
        else:
            spec = _EXTRACTION if request.people is None else _ATTRIBUTED_EXTRACTION
        return await self._ask(spec, request)


class OpenAIConsolidator(OpenAIChat):
    async def consolidate(self, request: ConsolidationRequest) -> Answer[ConsolidationAnswer]:
        return await self._ask(_CONSOLIDATION, request)


class OpenAISummarizer(OpenAIChat):
    async def summarize(self, request: SummaryRequest) -> Answer[SummaryAnswer]:
        return await self._ask(_SUMMARY, request)


class OpenAIPortraitWriter(OpenAIChat):
    async def portrait(self, request: PortraitRequest) -> Answer[PortraitAnswer]:
        return await self._ask(_PORTRAIT, request)


class OpenAINotePromoter(OpenAIChat):
    """The note promotion pass (docs/notes.md): recurring notes said as one fact."""

    async def promote(self, request: NotePromotionRequest) -> Answer[NotePromotionAnswer]:
        return await self._ask(_PROMOTION, request)
