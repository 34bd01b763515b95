"""`python -m tests.prompt_mutation ARGS`: the memfleet CLI with every one of its
prompts (extraction, consolidation, summary, portrait) replaced by one that asks for
nothing, as issue 38's audit did. What tests/integration/eval/test_eval_stub_claim.py
runs `memfleet eval` through to see whether a suite measures the prompts."""

from __future__ import annotations

import sys
from dataclasses import replace

from worker.cli.main import main
from worker.providers import openai_chat

MUTATION = "Reply with whatever you like."


def mutate() -> None:
    """Every pass of the openai providers sends MUTATION as its system prompt."""
    for name in ("_EXTRACTION", "_ATTRIBUTED_EXTRACTION", "_CONSOLIDATION", "_SUMMARY",
                 "_PORTRAIT"):
        setattr(openai_chat, name, replace(getattr(openai_chat, name), prompt=MUTATION))


if __name__ == "__main__":
    mutate()
    sys.exit(main(sys.argv[1:]))
