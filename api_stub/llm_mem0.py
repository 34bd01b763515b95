"""The LLM stub's mem0 answer mode: mem0's own prompts, answered in mem0's JSON shapes.

``bench.mem0_compare`` runs mem0 on the same stub as memfleet. mem0 does not
speak memfleet's wire format: it sends its own prompts, which are recognised
here by phrases of mem0's prompt text, and answered from the same offline
rules (worker.providers.rules) that answer memfleet, so the facts and the
decisions are the same ones:

- mem0 1.x fact extraction (system prompt "Personal Information Organizer",
  user message ``Input:\\n<role>: <content>`` lines): ``{"facts": [...]}``, the
  rules extractor's fact texts of the user's lines;
- mem0 1.x agent fact extraction (system prompt "Assistant Information Organizer",
  used when an ``add`` names an agent and its messages hold an assistant's): the
  prompt asks for facts from the assistant's messages only, so the rules extractor
  reads the assistant's lines (as if first-person statements) and nothing else;
- mem0 1.x memory update (one user message: mem0's update prompt, the old
  memories and the new facts as Python literals in triple backticks):
  ``{"memory": [{"id", "text", "event", "old_memory"?}]}``, the rules
  consolidator's decision for each fact against all the old memories, every
  untouched old memory kept as NONE;
- mem0 2.x additive extraction (system prompt "Memory Extractor", ADD only):
  ``{"memory": [{"id", "text"}]}``, the extracted facts that are not already
  among the "Existing Memories" (the prompt's own deduplication rule).

Anything else is not mem0's: ``mem0_answer`` returns None.
"""

from __future__ import annotations

import ast
import json
import re
from datetime import UTC, datetime
from typing import Any

from worker.providers.rules import decide, extract_facts
from worker.providers.rules_patterns import norm
from worker.providers.wire import (
    Candidate,
    ConsolidationRequest,
    ExtractionRequest,
    Neighbor,
    WireMessage,
)

EXTRACTION_MARK = "Personal Information Organizer"  # mem0 1.x USER_MEMORY_EXTRACTION_PROMPT
AGENT_EXTRACTION_MARK = "Assistant Information Organizer"  # mem0 1.x AGENT_MEMORY_EXTRACTION_PROMPT
UPDATE_MARK = "smart memory manager"  # mem0 1.x DEFAULT_UPDATE_MEMORY_PROMPT
ADDITIVE_MARK = "Memory Extractor"  # mem0 2.x ADDITIVE_EXTRACTION_PROMPT
_ROLE_LINE = re.compile(r"^(system|user|assistant): ?", re.MULTILINE)
_OLD_MEMORY = re.compile(r"collected till now\..*?```\s*(.*?)\s*```", re.DOTALL)
_NEW_FACTS = re.compile(r"new retrieved facts are mentioned in the triple backticks\..*?```"
                        r"\s*(.*?)\s*```", re.DOTALL)
_SECTION = r"## {name}\n(.*?)(?:\n\n## |\n\n# Output|\Z)"


def _today() -> str:
    now = datetime.now(UTC)
    return f"{now.date().isoformat()} ({now.strftime('%A')})"


def _conversation(text: str) -> list[WireMessage]:
    """mem0's parse_messages text ("user: ...\\nassistant: ...\\n") back into messages."""
    marks = list(_ROLE_LINE.finditer(text))
    out = []
    for mark, following in zip(marks, [*marks[1:], None], strict=True):
        end = following.start() if following is not None else len(text)
        out.append(WireMessage(role=mark.group(1), content=text[mark.end():end].strip()))
    return out


def _facts(conversation: str, *, assistant_only: bool = False) -> list[str]:
    messages = _conversation(conversation)
    if assistant_only:  # the assistant's lines, read as statements of their speaker
        messages = [WireMessage(role="user", content=m.content) for m in messages
                    if m.role == "assistant"]
    request = ExtractionRequest(observed_at=_today(), summary=None, context=(),
                                messages=tuple(messages))
    return [fact.text for fact in extract_facts(request).facts]


def _messages(body: dict[str, Any], role: str) -> list[str]:
    return [str(m.get("content", "")) for m in body.get("messages", [])
            if isinstance(m, dict) and m.get("role") == role]


def _literal(pattern: re.Pattern[str], text: str) -> list[Any]:
    match = pattern.search(text)
    if match is None:
        return []
    try:
        value = ast.literal_eval(match.group(1))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return []
    return list(value) if isinstance(value, list) else []


def _update(prompt: str) -> dict[str, Any]:
    old = [m for m in _literal(_OLD_MEMORY, prompt) if isinstance(m, dict)]
    facts = [str(f) for f in _literal(_NEW_FACTS, prompt)]
    # mem0 numbers the old memories "0", "1", ...: the rules consolidator's integer ids.
    texts = {int(m["id"]): str(m.get("text", "")) for m in old if str(m.get("id", "")).isdigit()}
    neighbours = tuple(Neighbor(id=i, text=t, observed_at="") for i, t in texts.items())
    request = ConsolidationRequest(observed_at=_today(), candidates=tuple(
        Candidate(candidate=n, text=fact, category="fact", neighbors=neighbours)
        for n, fact in enumerate(facts)))
    changed: dict[int, dict[str, Any]] = {}
    added: list[dict[str, Any]] = []
    for decision in decide(request).decisions:
        fact = facts[decision.candidate]
        target = decision.target
        if decision.event == "ADD":
            added.append({"text": decision.text or fact, "event": "ADD"})
        elif target in texts and target not in changed and decision.event == "UPDATE":
            changed[target] = {"id": str(target), "text": decision.text or fact,
                               "event": "UPDATE", "old_memory": texts[target]}
        elif target in texts and target not in changed and decision.event == "DELETE":
            changed[target] = {"id": str(target), "text": texts[target], "event": "DELETE"}
    memory = [changed.get(i, {"id": str(i), "text": t, "event": "NONE"}) for i, t in texts.items()]
    first_new = max(texts, default=-1) + 1
    memory += [{"id": str(first_new + k), **item} for k, item in enumerate(added)]
    return {"memory": memory}


def _additive(prompt: str) -> dict[str, Any]:
    def section(name: str) -> str:
        match = re.search(_SECTION.format(name=re.escape(name)), prompt, re.DOTALL)
        return match.group(1) if match else ""

    try:
        existing = json.loads(section("Existing Memories") or "[]")
    except json.JSONDecodeError:
        existing = []
    known = {norm(str(m.get("text", ""))) for m in existing if isinstance(m, dict)}
    new = [f for f in _facts(section("New Messages")) if norm(f) not in known]
    return {"memory": [{"id": str(n), "text": text} for n, text in enumerate(new)]}


def mem0_answer(body: dict[str, Any]) -> dict[str, Any] | None:
    """mem0's answer to a chat request carrying one of its prompts; None otherwise."""
    system, user = _messages(body, "system"), _messages(body, "user")
    if not user:
        return None
    if system and EXTRACTION_MARK in system[0] and user[-1].startswith("Input:"):
        return {"facts": _facts(user[-1].removeprefix("Input:"))}
    if system and AGENT_EXTRACTION_MARK in system[0] and user[-1].startswith("Input:"):
        return {"facts": _facts(user[-1].removeprefix("Input:"), assistant_only=True)}
    if system and ADDITIVE_MARK in system[0] and "## New Messages" in user[-1]:
        return _additive(user[-1])
    if UPDATE_MARK in user[-1] and _NEW_FACTS.search(user[-1]):
        return _update(user[-1])
    return None
