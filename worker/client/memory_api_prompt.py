"""The prompt split's two routes as Calls, and their answers (docs/prompt.md): both
blocks of a turn, and the stable block alone with a conditional request.

    blocks = api.prompt_blocks("ada", q=message, agent_id="coach")
    if blocks.stable.version != cached_version:
        ...  # the prefix changed: the provider's cache will miss once
    same = api.stable_block("ada", known_version=cached_version)  # None: unchanged (304)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from worker.client.memory_api_models import _int, _obj, _str, server_timing
from worker.client.memory_api_wire import Call, segment

NOT_MODIFIED = 304


@dataclass(frozen=True, slots=True)
class StableBlock:
    """The stable block: the user's profile (and the assistant's relationship facts)
    in a fixed order within a budget; ``version`` changes exactly when its bytes do."""

    block: str
    version: str
    count: int
    timing_ms: dict[str, float] = field(default_factory=dict)

    @classmethod
    def parse(cls, value: Any, timing_ms: dict[str, float] | None = None) -> StableBlock:
        d = _obj(value)
        return cls(block=_str(d["block"]), version=_str(d["version"]), count=_int(d["count"]),
                   timing_ms=timing_ms or {})


@dataclass(frozen=True, slots=True)
class VolatileBlock:
    """The facts retrieved for the turn's message that the stable block lacks, re-ranked."""

    block: str
    count: int


@dataclass(frozen=True, slots=True)
class PromptBlocks:
    stable: StableBlock
    volatile: VolatileBlock
    timing_ms: dict[str, float] = field(default_factory=dict)

    @classmethod
    def parse(cls, value: Any, timing_ms: dict[str, float] | None = None) -> PromptBlocks:
        d = _obj(value)
        volatile = _obj(d["volatile"])
        return cls(stable=StableBlock.parse(d["stable"]),
                   volatile=VolatileBlock(block=_str(volatile["block"]),
                                          count=_int(volatile["count"])),
                   timing_ms=timing_ms or {})


def _params(**values: str | None) -> dict[str, str]:
    return {name: value for name, value in values.items() if value is not None}


def prompt_blocks(user_id: str, q: str | None, agent_id: str | None) -> Call[PromptBlocks]:
    return Call("prompt_blocks", "GET", f"/users/{segment(user_id, 'user_id')}/prompt-blocks",
                lambda r: PromptBlocks.parse(r.json(),
                                             server_timing(r.headers.get("server-timing"))),
                params=_params(q=q, agent_id=agent_id))


def _stable_or_none(response: httpx.Response) -> StableBlock | None:
    if response.status_code == NOT_MODIFIED:
        return None
    return StableBlock.parse(response.json(), server_timing(response.headers.get("server-timing")))


def stable_block(user_id: str, agent_id: str | None,
                 known_version: str | None) -> Call[StableBlock | None]:
    """``known_version``: sent as If-None-Match; the answer is None when it is current."""
    headers = None if known_version is None else {"If-None-Match": f'"{known_version}"'}
    return Call("stable_block", "GET", f"/users/{segment(user_id, 'user_id')}/stable-block",
                _stable_or_none, params=_params(agent_id=agent_id), headers=headers,
                answers=(NOT_MODIFIED,))
