"""Settings and readers around the OpenAI-compatible stub (api_stub.llm_stub.StubServer).

The ``stub`` fixture itself, one server a test module, is in tests/integration/conftest.py.
"""

from __future__ import annotations

import json
from typing import Any

from api_stub.llm_stub import CHAT_PATH, StubServer
from worker.config import Settings


def openai_settings(settings: Settings, stub: StubServer, **overrides: Any) -> Settings:
    """``settings`` with both openai providers on ``stub`` (emptied first), no API key,
    and ``overrides`` on top."""
    stub.reset()
    return settings.model_copy(update={
        "llm_provider": "openai", "llm_base_url": stub.v1, "llm_api_key": None,
        "embed_provider": "openai", "embed_base_url": stub.v1, "embed_api_key": None,
        **overrides,
    })


def wire_requests(stub: StubServer, task: str | None = None) -> list[dict[str, Any]]:
    """The chat requests the stub received, as documents of the wire format; of one
    ``task`` ("fact_extraction", "memory_consolidation") when given."""
    documents = [json.loads(r["body"]["messages"][1]["content"])
                 for r in stub.recorded() if r["path"] == CHAT_PATH]
    return [d for d in documents if task is None or d["task"] == task]
