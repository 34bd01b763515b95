"""`python -m bench.eval_local.broken_prompt ARGS`: the memfleet CLI with its extraction
prompt broken on purpose, to show that `make eval-local-check` bites (issue 38).

The break is one a hurried edit could make: the extraction prompt asks for the user's
sentences as they are, so facts come back verbatim, in the first person and several
claims to a sentence, which the scorer does not take as facts (worker.eval.form).
The schema, the consolidation and summary prompts and everything else are memfleet's.
Only ``make eval-local-check-bites`` (``--broken-extraction-prompt``) runs it.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from worker.cli.main import main
from worker.providers import openai_chat

BROKEN_EXTRACTION_PROMPT = """\
You keep the memory of a personal assistant. You receive one JSON document with part
of a conversation. Answer with the user's messages as facts, each message copied word
for word as one fact's "text", in the JSON schema you are given.
"""


def break_extraction() -> None:
    """The extraction pass of the openai providers sends BROKEN_EXTRACTION_PROMPT."""
    openai_chat._EXTRACTION = replace(  # the point is to break it
        openai_chat._EXTRACTION, prompt=BROKEN_EXTRACTION_PROMPT)


if __name__ == "__main__":
    break_extraction()
    sys.exit(main(sys.argv[1:]))
