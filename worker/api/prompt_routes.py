"""The prompt split over HTTP (worker.read_split, docs/prompt.md): both blocks for a
turn, and the stable block alone with conditional requests.

    GET /users/{u}/prompt-blocks?q=...&agent_id=...   -> 200, ETag: "<stable version>"
    GET /users/{u}/stable-block?agent_id=...          -> 200, or 304 to If-None-Match

Read like known-facts: ``ReadUser`` (an end-user token of that user, or a service key
with the ``read`` scope), both blocks empty while the user's memory is off, and a
``Server-Timing`` header (worker.api.read_timing). The budgets and weights are the
settings' (MEMFLEET_READ_STABLE_*, _VOLATILE_TOP_K, _RERANK_*), read once per app.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response, status

from worker.api.deps import ApiDeps
from worker.api.errors import AUTH_RESPONSES, error_responses
from worker.api.memory_models import (
    PromptBlocksBody,
    StableBlockBody,
    VolatileBlockBody,
)
from worker.api.memory_routes import AgentQuery, OptionalQuery
from worker.api.read_timing import HEADER as SERVER_TIMING
from worker.api.read_timing import ReadTiming
from worker.api.service_auth import ReadUser
from worker.read_split import SplitPolicy, StableBlock, prompt_blocks, stable_block

router = APIRouter(prefix="/users/{user_id}", tags=["memory"])

_TIMING = {SERVER_TIMING: {
    "description": "Milliseconds: embed (the query's embeddings call; absent when none was "
                   "made), store (the read outside it), total (the handler).",
    "schema": {"type": "string"}}}
_ETAG = {"ETag": {"description": "The stable block's version, quoted: send it back as "
                                 "If-None-Match to /stable-block.",
                  "schema": {"type": "string"}}}


def _policy(request: Request) -> SplitPolicy:
    # Built from the settings once, with the app (worker.api.app).
    policy: SplitPolicy = request.app.state.split_policy
    return policy


def etag(version: str) -> str:
    """The strong entity tag of a stable block's version."""
    return f'"{version}"'


def matches(if_none_match: str | None, version: str) -> bool:
    """Whether an If-None-Match header names this version (or is ``*``); a weak tag
    (W/"...") compares by its value, as RFC 9110 has If-None-Match compare weakly."""
    if not if_none_match:
        return False
    for tag in if_none_match.split(","):
        tag = tag.strip()
        if tag == "*":
            return True
        if tag.removeprefix("W/") == etag(version):
            return True
    return False


def _stable(block: StableBlock) -> StableBlockBody:
    return StableBlockBody(block=block.block, version=block.version, count=block.count)


@router.get(
    "/prompt-blocks",
    response_model=PromptBlocksBody,
    responses={200: {"headers": {**_TIMING, **_ETAG}}, **AUTH_RESPONSES,
               **error_responses(503)},
    summary="The prompt split: the stable block (cacheable, with its version as the ETag) "
            "and the volatile block of this turn (both empty while memory is off)",
)
async def prompt_blocks_route(
    request: Request, response: Response, user_id: ReadUser, q: OptionalQuery = None,
    agent_id: AgentQuery = None,
) -> PromptBlocksBody:
    deps: ApiDeps = request.app.state.deps
    timing = ReadTiming(deps.providers.embedder, deps.providers.embedder_for)
    blocks = await prompt_blocks(deps.memory, timing.embedder, user_id, query=q,
                                 agent_id=agent_id, policy=_policy(request),
                                 embedders=timing.embedders,
                                 memory_default=deps.settings.memory_default)
    timing.read_done()
    answer = PromptBlocksBody(
        stable=_stable(blocks.stable),
        volatile=VolatileBlockBody(block=blocks.volatile.block, count=blocks.volatile.count))
    response.headers["ETag"] = etag(blocks.stable.version)
    response.headers[SERVER_TIMING] = timing.header()
    return answer


_NOT_MODIFIED: dict[int | str, dict[str, Any]] = {
    304: {"description": "The stable block is the one If-None-Match names: no body.",
          "headers": _ETAG}}


@router.get(
    "/stable-block",
    response_model=StableBlockBody,
    responses={200: {"headers": {**_TIMING, **_ETAG}}, **_NOT_MODIFIED, **AUTH_RESPONSES,
               **error_responses(503)},
    summary="The stable block alone, with its version as the ETag; 304 Not Modified to an "
            "If-None-Match that names it",
)
async def stable_block_route(
    request: Request, response: Response, user_id: ReadUser, agent_id: AgentQuery = None,
) -> Any:
    deps: ApiDeps = request.app.state.deps
    timing = ReadTiming(deps.providers.embedder, deps.providers.embedder_for)
    block = await stable_block(deps.memory, user_id, agent_id=agent_id,
                               policy=_policy(request),
                               memory_default=deps.settings.memory_default)
    timing.read_done()
    headers = {"ETag": etag(block.version)}
    if matches(request.headers.get("if-none-match"), block.version):
        return Response(status_code=status.HTTP_304_NOT_MODIFIED,
                        headers={**headers, SERVER_TIMING: timing.header()})
    response.headers.update(headers)
    response.headers[SERVER_TIMING] = timing.header()
    return _stable(block)
