"""What a model provider's prefix cache can reuse from one turn's prompt to the next:
the longest common prefix in bytes, and its share of the prompt bytes over a
conversation. Pure; no dependencies beyond the standard library."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass


def common_prefix_bytes(a: bytes, b: bytes) -> int:
    """How many leading bytes ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # a[:low] == b[:low], a[:high] != b[:high]
    while high - low > 1:
        mid = (low + high) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid
    return low


@dataclass(frozen=True, slots=True)
class PrefixShare:
    """Over turns 2..N: each turn's prefix in common with the turn before, summed, and
    the prompts' bytes, summed."""

    prefix_bytes: int
    prompt_bytes: int
    per_turn: tuple[int, ...]  # turn 2..N's common prefix with the turn before

    @property
    def share(self) -> float:
        """The share of the prompt bytes a prefix cache could reuse (0 with no turn 2)."""
        return self.prefix_bytes / self.prompt_bytes if self.prompt_bytes else 0.0


def cacheable_share(prompts: Sequence[bytes]) -> PrefixShare:
    """The prompts of a conversation's turns, in order: turn 1 has nothing before it and
    counts in neither sum."""
    per_turn = tuple(common_prefix_bytes(before, now)
                     for before, now in itertools.pairwise(prompts))
    return PrefixShare(sum(per_turn), sum(len(p) for p in prompts[1:]), per_turn)


def render_prompt(system: Sequence[str], conversation: Sequence[tuple[str, str]]) -> bytes:
    """A chat request as the bytes a provider sees in order: the system prompt's parts
    (empty ones left out) joined by a blank line, then each (role, text) message."""
    parts = ["[system]\n" + "\n\n".join(p for p in system if p)]
    parts += [f"[{role}]\n{text}" for role, text in conversation]
    return "\n\n".join(parts).encode("utf-8")
