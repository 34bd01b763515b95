"""The provider interfaces the pipeline calls. Providers never touch the database."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from worker.errors import ConfigurationError
from worker.providers.wire import (
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
from worker.vectors import Vector


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one call used; zero for the offline providers."""

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens
        )


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Answer(Generic[T]):
    value: T
    usage: Usage
    model: str


class Labelled(Protocol):
    """What a provider call's span names: ``gen_ai.provider.name`` and the requested model."""

    @property
    def provider_name(self) -> str: ...

    @property
    def model(self) -> str: ...


class Extractor(Labelled, Protocol):
    async def extract(self, request: ExtractionRequest) -> Answer[ExtractionAnswer]: ...


class Consolidator(Labelled, Protocol):
    async def consolidate(
        self, request: ConsolidationRequest
    ) -> Answer[ConsolidationAnswer]: ...


class Summarizer(Labelled, Protocol):
    async def summarize(self, request: SummaryRequest) -> Answer[SummaryAnswer]: ...


class PortraitWriter(Labelled, Protocol):
    """The ``user_portrait`` pass (docs/portrait.md): called by the fleet's portrait job,
    never by a session's job."""

    async def portrait(self, request: PortraitRequest) -> Answer[PortraitAnswer]: ...


class NotePromoter(Labelled, Protocol):
    """The note promotion pass (docs/notes.md): recurring notes said as one fact."""

    async def promote(self, request: NotePromotionRequest) -> Answer[NotePromotionAnswer]: ...

    async def aclose(self) -> None: ...


class Embedder(Labelled, Protocol):
    @property
    def dim(self) -> int: ...

    async def embed(self, texts: list[str]) -> Answer[Vector]:
        """One call for all texts: a float32 matrix of unit-length rows, in input order."""
        ...


# Builds an embedder for another model and dimension from the same provider settings.
EmbedderFactory = Callable[[str, int], Embedder]


@dataclass(frozen=True, slots=True)
class Providers:
    extractor: Extractor
    consolidator: Consolidator
    summarizer: Summarizer
    embedder: Embedder
    # For users whose facts `memfleet reembed` moved to another model than
    # ``embedder``'s: their candidates are embedded again with that one.
    embedder_factory: EmbedderFactory | None = None
    # The user's portrait (docs/portrait.md); None where nothing writes portraits.
    portrait_writer: PortraitWriter | None = None
    _other_embedders: dict[tuple[str, int], Embedder] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    def embedder_for(self, model: str, dim: int) -> Embedder:
        """The embedder of ``model`` at ``dim``, built once per pair."""
        if (model, dim) == (self.embedder.model, self.embedder.dim):
            return self.embedder
        built = self._other_embedders.get((model, dim))
        if built is None:
            if self.embedder_factory is None:
                raise ConfigurationError(
                    f"no embedder can be built for {model} at {dim} dimensions")
            built = self._other_embedders[(model, dim)] = self.embedder_factory(model, dim)
        return built

    async def aclose(self) -> None:
        others = list(self._other_embedders.values())
        self._other_embedders.clear()
        writer = () if self.portrait_writer is None else (self.portrait_writer,)
        for provider in (self.extractor, self.consolidator, self.summarizer, self.embedder,
                         *writer, *others):
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()
