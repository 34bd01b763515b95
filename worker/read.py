"""The read path, for chat servers: what memory says about a user, ready for a prompt.

    async with open_reader(Settings()) as reader:  # once: its pool and embedder
        ...
        block = await reader.known_facts_block(user_id, query=first_message, top_k=50)
        system_prompt = base_prompt + ("\\n\\n" + block if block else "")

All active facts while a user has few; the top-k most relevant to the query
(hybrid search, worker.read_search: meaning and words, fused by Reciprocal Rank
Fusion) when they have more. Every read takes a scope and an agent
(docs/memory_model.md): by default the user's profile and, given ``agent_id``,
that agent's relationship facts; never another agent's. A user whose memory is
off gets nothing here (their choice, else the fleet's default
MEMFLEET_MEMORY_DEFAULT, read in the same statement as the facts;
docs/memory_model.md, "Consent"): the block is empty, and their words go to no
embeddings call. Nothing here writes.

This module holds the read's plan (which facts: all of them, the newest, or the
search's top-k) and ``MemoryReader``, the chat server's handle on all of it; the
block's text is worker.read_block's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from worker.errors import ConfigurationError
from worker.memory_rules import MemoryScope
from worker.providers.base import Embedder, EmbedderFactory

# The known-facts block's text is worker.read_block's, the hybrid search
# worker.read_search's: their names are re-exported here, where chat servers, the
# memory API and evaluation have imported them.
from worker.read_block import BLOCK_HEADER as BLOCK_HEADER
from worker.read_block import fact_line as fact_line
from worker.read_block import format_block as format_block
from worker.read_block import recall_order as recall_order
from worker.read_search import MAX_QUERY_WORDS as MAX_QUERY_WORDS
from worker.read_search import RRF_K as RRF_K
from worker.read_search import SearchHit as SearchHit
from worker.read_search import embedder_on as embedder_on
from worker.read_search import fused_search as fused_search
from worker.read_search import query_embedder as query_embedder
from worker.read_search import remembered as remembered
from worker.read_search import rrf as rrf
from worker.read_search import search_facts as search_facts
from worker.read_search import words_query as words_query
from worker.store.base import MemoryStore
from worker.store.postgres import PostgresStore, StoreOrPool, memory_store
from worker.store.types import ConsentGate, FactRecord, ReadPlan

if TYPE_CHECKING:
    from worker.config import Settings
    from worker.read_notes import NoteHit
    from worker.read_split import PromptBlocks, SplitPolicy, StableBlock
    from worker.store.portraits import Portrait


async def known_facts(
    store_or_pool: StoreOrPool,
    embedder: Embedder,
    user_id: str,
    *,
    query: str | None = None,
    top_k: int | None = None,
    scope: MemoryScope = "both",
    agent_id: str | None = None,
    embedders: EmbedderFactory | None = None,
    memory_default: bool = True,
) -> list[FactRecord]:
    """All active facts of ``scope``, or the top_k most relevant to ``query`` when the
    user has more; none while the user's memory is off (their choice, else
    ``memory_default``: the fleet's MEMFLEET_MEMORY_DEFAULT).

    Without a query or a top_k every active fact is returned. With both, a user
    with at most top_k facts still gets them all (no embeddings call).
    """
    facts, _ = await planned_known_facts(
        store_or_pool, embedder, user_id, query=query, top_k=top_k, scope=scope,
        agent_id=agent_id, embedders=embedders, memory_default=memory_default)
    return facts


async def planned_known_facts(
    store_or_pool: StoreOrPool, embedder: Embedder, user_id: str, *,
    query: str | None = None, top_k: int | None = None, scope: MemoryScope = "both",
    agent_id: str | None = None, embedders: EmbedderFactory | None = None,
    memory_default: bool = True,
) -> tuple[list[FactRecord], ReadPlan | None]:
    """known_facts, and the read's plan when it read one (a query and a top_k): what
    the people section may reuse (ReadPlan.people)."""
    store = memory_store(store_or_pool)
    if top_k is not None and top_k < 1:
        raise ValueError("top_k must be at least 1")
    if scope == "none":
        return [], None
    # Each read checks consent in its own statement: memory off, each finds nothing
    # (a count of 0 takes the no-search branch, so no embeddings call either).
    gate = ConsentGate(memory_default)
    if top_k is None:
        return await store.facts(user_id, scope=scope, agent_id=agent_id,
                                 consent_gate=gate), None
    if query is None or not query.strip():
        # The newest top_k, picked by the store: the others are never fetched.
        return await store.newest_facts(user_id, top_k, scope=scope, agent_id=agent_id,
                                        consent_gate=gate), None
    # The count and the facts' model in one round trip.
    plan = await store.read_plan(user_id, scope=scope, agent_id=agent_id, consent_gate=gate)
    if plan.active <= top_k:
        return await store.facts(user_id, scope=scope, agent_id=agent_id,
                                 consent_gate=gate), plan
    # More than top_k found behind the gate: memory is on, no second look before the
    # embeddings call (the search checks the gate again in its own statement).
    hits = await fused_search(store, embedder_on(plan.embedding, embedder, embedders), user_id,
                              query, top_k=top_k, scope=scope, agent_id=agent_id,
                              consent_gate=gate)
    return [hit.fact for hit in hits], plan


async def known_facts_block(
    store_or_pool: StoreOrPool,
    embedder: Embedder,
    user_id: str,
    *,
    query: str | None = None,
    top_k: int | None = None,
    scope: MemoryScope = "both",
    agent_id: str | None = None,
    memory_default: bool = True,
) -> str:
    """The "known facts about the user" block for a new session's system prompt ("" if
    none, or while the user's memory is off): the profile, and the relationship with
    ``agent_id`` when given."""
    return format_block(await known_facts(store_or_pool, embedder, user_id, query=query,
                                          top_k=top_k, scope=scope, agent_id=agent_id,
                                          memory_default=memory_default))


class _Embedders:
    """The settings' embedder, and one per other model a user's facts were moved to
    (`memfleet reembed`), each built once: queries are embedded as the facts are."""

    def __init__(self, settings: Settings) -> None:
        # Imported here: a chat server that reads through a store of its own never needs
        # the providers' clients.
        from worker.providers.factory import embedding_model

        self._settings = settings
        self.default = self._build(embedding_model(settings), settings.embed_dim)
        self._built: dict[tuple[str, int], Embedder] = {
            (self.default.model, self.default.dim): self.default}

    def _build(self, model: str, dim: int) -> Embedder:
        from worker.providers.factory import build_embedder

        return build_embedder(self._settings, model, dim)

    def __call__(self, model: str, dim: int) -> Embedder:
        if (model, dim) not in self._built:
            self._built[(model, dim)] = self._build(model, dim)
        return self._built[(model, dim)]

    async def aclose(self) -> None:
        built, self._built = list(self._built.values()), {}
        for embedder in built:
            close = getattr(embedder, "aclose", None)
            if close is not None:
                await close()


class MemoryReader:
    """The read path with what it reads through: a store and an embedder.

    A chat server opens one at start (``open_reader`` or ``from_settings``, which
    own a PostgreSQL pool and the embedder of the settings) and closes it at the
    end; tests and the memory API build one on a store of their own. Its reads are
    for prompts: nothing while the user's memory is off. Nothing here writes.
    """

    def __init__(
        self, store: MemoryStore, embedder: Embedder, *,
        embedders: EmbedderFactory | None = None, memory_default: bool = True,
        split: SplitPolicy | None = None, people_max_facts: int = 0, notes_top_k: int = 0,
    ) -> None:
        """``embedders``: builds the embedder of another (model, dimension), for users whose
        facts were moved to one; without it, every query goes through ``embedder``.
        ``memory_default``: whether a user who never chose has memory on
        (MEMFLEET_MEMORY_DEFAULT; ``from_settings`` takes the settings'). ``split``: the
        prompt split's budgets and weights (worker.read_split; None: its defaults).
        ``notes_top_k``: notes in the known-facts block (MEMFLEET_READ_NOTES_TOP_K,
        docs/notes.md; 0: none)."""
        self.store, self.embedder, self.embedders = store, embedder, embedders
        self.memory_default, self.split = memory_default, split
        # The people section (worker.read_persons, MEMFLEET_READ_PEOPLE_MAX_FACTS): 0, none.
        self.people_max_facts = people_max_facts
        self.notes_top_k = notes_top_k
        self._owned: list[Any] = []  # what aclose closes: what from_settings opened

    @classmethod
    async def from_settings(cls, settings: Settings) -> Self:
        """A reader on MEMFLEET_DATABASE_URL (a pool of MEMFLEET_DB_POOL_MIN to _MAX
        connections) with the settings' embeddings provider; close it with ``aclose``.
        Needs no Redis, no chat model and no erase fence key: it only reads."""
        if not settings.database_url:
            raise ConfigurationError("the memory reader needs MEMFLEET_DATABASE_URL")
        embedders = _Embedders(settings)  # every option checked before a connection opens
        try:
            store = await PostgresStore.connect(settings.database_url,
                                                min_size=settings.db_pool_min,
                                                max_size=settings.db_pool_max)
        except BaseException:
            await embedders.aclose()
            raise
        from worker.read_split import SplitPolicy

        reader = cls(store, embedders.default, embedders=embedders,
                     memory_default=settings.memory_default,
                     split=SplitPolicy.from_settings(settings),
                     people_max_facts=settings.read_people_max_facts,
                     notes_top_k=settings.read_notes_top_k)
        reader._owned = [store, embedders]
        return reader

    async def aclose(self) -> None:
        """Close the pool and the embedders ``from_settings`` opened (a reader built on a
        store of its caller's closes nothing)."""
        owned, self._owned = self._owned, []
        for resource in owned:
            await resource.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def known_facts_block(
        self, user_id: str, *, query: str | None = None, top_k: int | None = None,
        scope: MemoryScope = "both", agent_id: str | None = None,
    ) -> str:
        """The "known facts about the user" block for a system prompt ("" if none): all
        active facts while the user has at most ``top_k``, else the ``top_k`` most
        relevant to ``query``; the profile, and ``agent_id``'s relationship facts; then
        the people section (worker.read_persons) when the reader has one; then, with
        ``notes_top_k`` and a query, the notes most relevant to it in a section of their
        own (worker.read_notes)."""
        facts, plan = await planned_known_facts(
            self.store, self.embedder, user_id, query=query, top_k=top_k, scope=scope,
            agent_id=agent_id, embedders=self.embedders, memory_default=self.memory_default)
        block = format_block(facts)
        if self.people_max_facts:
            from worker.read_persons import people_section, with_people

            block = with_people(block, await people_section(
                self.store, user_id, max_facts=self.people_max_facts,
                memory_default=self.memory_default,
                counted=None if plan is None else plan.people))
        if not self.notes_top_k or scope in ("none", "relationship"):
            return block
        from worker.read_notes import prompt_notes, with_notes

        return with_notes(block, await prompt_notes(
            self.store, self.embedder, user_id, query, top_k=self.notes_top_k,
            memory_default=self.memory_default))

    async def known_facts(
        self, user_id: str, *, query: str | None = None, top_k: int | None = None,
        scope: MemoryScope = "both", agent_id: str | None = None,
    ) -> list[FactRecord]:
        """The facts of ``known_facts_block``, as records."""
        return await known_facts(self.store, self.embedder, user_id, query=query, top_k=top_k,
                                 scope=scope, agent_id=agent_id, embedders=self.embedders,
                                 memory_default=self.memory_default)

    async def prompt_blocks(
        self, user_id: str, *, query: str | None = None, agent_id: str | None = None,
    ) -> PromptBlocks:
        """The prompt split (worker.read_split, docs/prompt.md): the stable block with its
        version, and the volatile block of the facts retrieved for ``query``."""
        from worker.read_split import prompt_blocks

        return await prompt_blocks(self.store, self.embedder, user_id, query=query,
                                   agent_id=agent_id, policy=self.split,
                                   embedders=self.embedders,
                                   memory_default=self.memory_default)

    async def stable_block(self, user_id: str, *, agent_id: str | None = None) -> StableBlock:
        """The stable block alone, with its version: no query, no embeddings call."""
        from worker.read_split import stable_block

        return await stable_block(self.store, user_id, agent_id=agent_id, policy=self.split,
                                  memory_default=self.memory_default)

    async def portrait(self, user_id: str) -> Portrait | None:
        """The user's portrait (docs/portrait.md); None while there is none or memory is off."""
        from worker.read_split import user_portrait

        return await user_portrait(self.store, user_id, memory_default=self.memory_default)

    async def search(
        self, user_id: str, query: str, *, top_k: int, scope: MemoryScope = "both",
        agent_id: str | None = None, valid_at: datetime | None = None,
        known_at: datetime | None = None,
    ) -> list[SearchHit]:
        """The user's top-k facts for ``query`` (``search_facts``); none while the
        user's memory is off."""
        return await search_facts(self.store, self.embedder, user_id, query, top_k=top_k,
                                  scope=scope, agent_id=agent_id, valid_at=valid_at,
                                  known_at=known_at, embedders=self.embedders,
                                  consent_gate=ConsentGate(self.memory_default))

    async def search_notes(self, user_id: str, query: str, *, top_k: int) -> list[NoteHit]:
        """The user's top-k notes for ``query`` (worker.read_notes), each marked
        ``kind = "note"``; none while the user's memory is off."""
        from worker.read_notes import search_notes

        return await search_notes(self.store, self.embedder, user_id, query, top_k=top_k,
                                  consent_gate=ConsentGate(self.memory_default))


@asynccontextmanager
async def open_reader(settings: Settings) -> AsyncIterator[MemoryReader]:
    """``MemoryReader.from_settings``, closed when the block ends."""
    reader = await MemoryReader.from_settings(settings)
    try:
        yield reader
    finally:
        await reader.aclose()
