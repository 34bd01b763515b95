"""The stub suite is not what scores the prompts, and docs/eval.md says so (issue 38).

The OpenAI-compatible stub answers memfleet's requests by their ``task`` field with
the offline rules, and never reads the system prompt: the audit replaced all three
prompts with "Reply with whatever you like." and the suite still scored 103/127.
This test runs the shipped suite on the stub twice, with the prompts and with that
mutation, and holds docs/eval.md to what it sees: if the scores agree, the docs must
say that the stub suite does not measure prompts (and must not promise that it
catches a prompt regression); if a stub ever reads the prompts and the scores
differ, the docs must stop saying so. Prompt regressions are caught on a real model
(`make eval-local` with `--min-score`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from api_stub.llm_stub import CHAT_PATH, StubServer
from tests.helpers import worker_env
from tests.prompt_mutation import MUTATION
from worker.config import Settings
from worker.providers.prompts import CONSOLIDATION_PROMPT, EXTRACTION_PROMPT

EVAL_DOC = Path(__file__).resolve().parents[3] / "docs" / "eval.md"
# What docs/eval.md says while the stub's score does not depend on the prompts.
NOT_MEASURED = "the stub suite does not measure memfleet's prompts"
PROMISE = "catch a prompt change"


def _eval(env: dict[str, str], out: Path, *cli: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, *cli, "eval", "--json", str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    document: dict[str, Any] = json.loads(out.read_text("utf-8"))
    return document


def _held(document: dict[str, Any]) -> dict[str, tuple[int, int]]:
    kinds = {k["kind"]: (k["held"], k["assertions"]) for k in document["kinds"]}
    return {**kinds, "total": (document["total"]["held"], document["total"]["assertions"])}


def _system_prompts(stub: StubServer) -> set[str]:
    return {r["body"]["messages"][0]["content"] for r in stub.recorded()
            if r["path"] == CHAT_PATH}


async def test_the_stub_suite_does_not_measure_prompts_and_the_docs_say_so(
        settings: Settings, stub: StubServer, tmp_path: Path) -> None:
    env = worker_env(settings, llm_provider="openai", llm_base_url=stub.v1,
                     embed_provider="openai", embed_base_url=stub.v1,
                     extract_model="stub-extract", consolidate_model="stub-consolidate")
    stub.reset()
    right = _held(_eval(env, tmp_path / "right.json", "-m", "worker.cli"))
    # Persons off (the default): extraction sends the prompt without the persons' part.
    assert {EXTRACTION_PROMPT, CONSOLIDATION_PROMPT} <= _system_prompts(stub)
    stub.reset()
    mutated = _held(_eval(env, tmp_path / "mutated.json", "-m", "tests.prompt_mutation"))
    # The premise: every request of the second run carried the mutation, nothing else.
    assert _system_prompts(stub) == {MUTATION}
    print(f"prompts: {right['total']}; {MUTATION!r}: {mutated['total']}")
    doc = " ".join(EVAL_DOC.read_text("utf-8").split())
    says_not_measured = NOT_MEASURED in doc
    if right == mutated:
        assert says_not_measured, f"docs/eval.md must say {NOT_MEASURED!r}"
        assert PROMISE not in doc, "docs/eval.md promises what the stub suite cannot do"
    else:
        assert not says_not_measured, "the stub's score now depends on the prompts: " \
            "docs/eval.md, and this test, must say what it measures"
    # Today's behaviour, as the audit found it: the same score either way.
    assert right == mutated
