"""What every request of the memory API and the chat stand-in must be: clean, bounded text.

Sizes are constants, not settings, so the OpenAPI document is the same
whatever the deployment's environment (docs/openapi.json is checked against it).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from worker.memory_rules import (
    DEFAULT_MAX_ID_CHARS,
    DEFAULT_MAX_MESSAGE_CHARS,
    id_fault,
    text_fault,
)

MAX_ID_CHARS = DEFAULT_MAX_ID_CHARS
MAX_CONTENT_CHARS = DEFAULT_MAX_MESSAGE_CHARS  # a chat turn must fit in a hand-over


def clean_text(value: str) -> str:
    """Refuse text PostgreSQL or the hand-over would refuse later (as 422, never 500)."""
    fault = text_fault(value)
    if fault is not None:
        raise ValueError(f"text {fault}")
    if not value.strip():
        raise ValueError("text is blank")
    return value


CleanText = Annotated[str, AfterValidator(clean_text)]


def valid_id(value: str) -> str:
    """A user or session id, by the hand-over's own rule (worker.memory_rules.id_fault)."""
    fault = id_fault(value, MAX_ID_CHARS)
    if fault is not None:
        raise ValueError(f"id {fault}")
    return value


Id = Annotated[str, AfterValidator(valid_id)]


# An agent (persona, assistant instance) id: the same rule as user and session ids.
AgentId = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS), AfterValidator(valid_id)]
