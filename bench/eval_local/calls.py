"""What the model got wrong, call by call, read from the endpoint's record (serve.py).

Each chat call memfleet made is judged by memfleet's own rules: the answer parsed as
the pipeline parses it (worker.providers.llm_json.parse_answer, against the pass's wire
model) and a consolidation's decisions checked as the pipeline checks them
(worker.pipeline.decisions.validate, against the ids the request offered). Pure
functions of the recorded calls: no model, no server.

Outcomes of a call: ``ok``; ``empty`` (no text); ``invalid_json`` (no JSON object in
it); ``schema`` (JSON that breaks the pass's schema); ``cut_off`` (the answer hit the
token limit); ``cut_kept`` (an extraction that hit it, whose complete facts the
pipeline keeps: worker.providers.llm_json.salvage_items); ``http`` (the endpoint
failed); ``rejected`` (a consolidation whose decisions the pipeline refused in part: a
target outside the candidate's offered neighbours, a decision missing, ...). A re-ask is
a call that repeats an unusable one: the same messages again (extraction, summary:
``openai_chat``'s answer attempts), or the same consolidation request with
``corrections`` (``consolidate.run``'s second ask). It ``recovered`` when what the first
call left unusable, the second made usable.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from worker.errors import ProviderAnswerInvalid
from worker.pipeline.decisions import PreparedRequest, Validated, validate
from worker.providers.llm_json import parse_answer, salvage_items
from worker.providers.prompts import CONSOLIDATION_PROMPT, EXTRACTION_PROMPT, SUMMARY_PROMPT
from worker.providers.wire import (
    ConsolidationAnswer,
    ConsolidationRequest,
    ExtractionAnswer,
    SummaryAnswer,
)

PASSES: dict[str, type[BaseModel]] = {
    "fact_extraction": ExtractionAnswer,
    "memory_consolidation": ConsolidationAnswer,
    "session_summary": SummaryAnswer,
}
_BY_PROMPT = {EXTRACTION_PROMPT: "fact_extraction", CONSOLIDATION_PROMPT: "memory_consolidation",
              SUMMARY_PROMPT: "session_summary"}
OUTCOMES = ("ok", "rejected", "empty", "invalid_json", "schema", "cut_off", "cut_kept", "http")
USABLE = frozenset({"ok", "cut_kept"})  # what the pipeline goes on with, not asking again
# The pipeline's reasons (decisions.validate), by the words that tell them apart.
REASONS = (("is not among", "id_outside"), ("no such candidate", "no_such_candidate"),
           ("needs a target", "no_target"), ("one decision per candidate", "two_decisions"),
           ("no acceptable decision", "no_decision"))


@dataclass(slots=True)
class Call:
    task: str
    outcome: str
    seconds: float
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    prompt_ms: float = 0.0  # llama.cpp's own timings of the uncached prompt
    predicted_ms: float = 0.0
    reasons: Counter[str] = field(default_factory=Counter)  # rejected decisions, by reason
    reask: bool = False
    recovered: bool = False
    rejected: int = 0  # candidates without an acceptable decision (consolidation)
    system: str = ""  # the system that made it (serve.py's /sys/NAME prefix)


def task_of(request: dict[str, Any]) -> str:
    fmt = request.get("response_format") or {}
    name = (fmt.get("json_schema") or {}).get("name")
    if name in PASSES:
        return str(name)
    messages = request.get("messages") or [{}]
    return _BY_PROMPT.get(messages[0].get("content", ""), "other")


def _content(response: dict[str, Any]) -> tuple[str | None, str | None]:
    choices = response.get("choices") or [{}]
    choice = choices[0]
    return (choice.get("message") or {}).get("content"), choice.get("finish_reason")


def _is_json(text: str) -> bool:
    body = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```")
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


def _offered(request_json: dict[str, Any]) -> PreparedRequest:
    request = ConsolidationRequest.model_validate(request_json)
    offered = tuple(frozenset(n.id for n in c.neighbors) for c in request.candidates)
    return PreparedRequest(request, {}, offered, {})


def _candidate(reason: str) -> int | None:
    """The candidate a reason names (``candidate 3: ...``)."""
    head = reason.split(":", 1)[0].removeprefix("candidate ")
    return int(head) if head.lstrip("-").isdigit() else None


def _reasons(reasons: Iterable[str]) -> Counter[str]:
    return Counter(label for reason in reasons for words, label in REASONS if words in reason)


def judge(entry: dict[str, Any]) -> tuple[Call, Validated | None, dict[str, Any] | None]:
    """One recorded call: its outcome, and for a consolidation the pipeline's verdict and
    its request (without corrections) to pair re-asks with."""
    request, response = entry.get("request") or {}, entry.get("response") or {}
    name = task_of(request)
    usage = response.get("usage") or {}
    timings = response.get("timings") or {}
    call = Call(name, "ok", float(entry.get("seconds", 0.0)),
                int(usage.get("prompt_tokens") or 0),
                int((usage.get("prompt_tokens_details") or {}).get("cached_tokens")
                    or timings.get("cache_n") or 0),
                int(usage.get("completion_tokens") or 0),
                float(timings.get("prompt_ms") or 0.0), float(timings.get("predicted_ms") or 0.0),
                system=str(entry.get("system") or ""))
    if entry.get("status") != 200:
        call.outcome = "http"
        return call, None, None
    content, finish = _content(response)
    if name not in PASSES:  # another system's prompt (mem0's): empty, or not the JSON asked
        call.outcome = "ok" if content and content.strip() else "empty"
        if call.outcome == "ok" and (request.get("response_format") or {}).get("type") \
                in ("json_object", "json_schema") and not _is_json(content or ""):
            call.outcome = "invalid_json"
        return call, None, None
    if finish == "length":
        kept = name == "fact_extraction" and salvage_items(content, ExtractionAnswer)
        call.outcome = "cut_kept" if kept else "cut_off"
        return call, None, None
    try:
        answer = parse_answer(content, PASSES[name])
    except ProviderAnswerInvalid as exc:
        text = str(exc)
        call.outcome = ("empty" if "empty" in text else
                        "invalid_json" if "no complete JSON" in text else "schema")
        return call, None, None
    if not isinstance(answer, ConsolidationAnswer):
        return call, None, None
    body = json.loads(request["messages"][-1]["content"])
    corrections = body.pop("corrections", None)
    call.reask = bool(corrections)
    verdict = validate(_offered(body), answer)
    call.rejected = verdict.rejected
    call.reasons = _reasons(verdict.reasons)
    if verdict.rejected:
        call.outcome = "rejected"
    return call, verdict, body


def judge_all(entries: Iterable[dict[str, Any]]) -> list[Call]:
    """Every call in order, re-asks paired with the call they repeat."""
    calls: list[Call] = []
    unusable: set[str] = set()  # the messages of unusable extraction and summary calls
    first_verdicts: dict[str, Validated] = {}  # the last rejecting answer per request
    for entry in entries:
        call, verdict, body = judge(entry)
        request = entry.get("request") or {}
        if call.task == "memory_consolidation" and body is not None \
                and verdict is not None:
            key = json.dumps(body, sort_keys=True)
            if call.reask and key in first_verdicts:
                first_verdict = first_verdicts.pop(key)
                # The pipeline keeps the first answer's decisions and takes the re-ask's
                # for the rest: judged as merged, as it is used.
                merged = first_verdict.merged(verdict)
                call.recovered = merged.rejected < first_verdict.rejected
                call.rejected = merged.rejected
                call.outcome = "rejected" if merged.rejected else "ok"
                call.reasons = _reasons(r for r in verdict.reasons
                                        if _candidate(r) not in merged.decisions)
            elif verdict.rejected:
                first_verdicts[key] = verdict
        elif call.task in PASSES:
            key = json.dumps(request.get("messages"), sort_keys=True)
            if key in unusable:
                call.reask = True
                call.recovered = call.outcome in USABLE
                unusable.discard(key)
            if call.outcome not in USABLE:
                unusable.add(key)
        calls.append(call)
    return calls


def read_entries(path: Path) -> list[dict[str, Any]]:
    """The record's lines: chat calls, and embeddings requests (``"embeddings": n``)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def read_calls(path: Path, system: str | None = None) -> list[Call]:
    """The chat calls of the record, judged; only ``system``'s when given."""
    return judge_all(e for e in read_entries(path) if "embeddings" not in e
                     and (system is None or str(e.get("system") or "") == system))


# ---------------------------------------------------------------- report


def _rate(tokens: int, ms: float) -> str:
    return f"{tokens / ms * 1000:.1f}" if ms > 0 else "-"


def table(calls: Sequence[Call]) -> str:
    """Per pass: the outcomes of the calls, the re-asks and what they recovered, the
    decisions refused by reason, the seconds and tokens."""
    names = [n for n in (*PASSES, "other") if any(c.task == n for c in calls)]
    head = ("task", "calls", *OUTCOMES, "re-asks", "recovered")
    rows: list[tuple[str, ...]] = [head]
    for name in [*names, "total"]:
        mine = [c for c in calls if name in (c.task, "total")]
        counts = Counter(c.outcome for c in mine)
        reasks = [c for c in mine if c.reask]
        rows.append((name, str(len(mine)), *(str(counts[o]) for o in OUTCOMES),
                     str(len(reasks)), str(sum(c.recovered for c in reasks))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    out = ["  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in
                     enumerate(zip(row, widths, strict=True))) for row in rows]
    reasons: Counter[str] = Counter()
    for c in calls:
        reasons += c.reasons
    if reasons:
        out += ["", "consolidation decisions refused, by reason (first asks and re-asks): "
                + ", ".join(f"{label} {n}" for label, n in sorted(reasons.items()))]
    out += ["", "task                   calls  s/call  median  max  prompt tok  cached  "
            "answer tok  prompt tok/s  answer tok/s"]
    for name in [*names, "total"]:
        mine = [c for c in calls if name in (c.task, "total")]
        if not mine:
            continue
        seconds = [c.seconds for c in mine]
        uncached = sum(c.prompt_tokens - c.cached_tokens for c in mine)
        answered = sum(c.completion_tokens for c in mine)
        out.append(
            f"{name:<22} {len(mine):>5}  {statistics.fmean(seconds):>6.1f}  "
            f"{statistics.median(seconds):>6.1f}  {max(seconds):>3.0f}  "
            f"{statistics.fmean(c.prompt_tokens for c in mine):>10.0f}  "
            f"{statistics.fmean(c.cached_tokens for c in mine):>6.0f}  "
            f"{statistics.fmean(c.completion_tokens for c in mine):>10.0f}  "
            f"{_rate(uncached, sum(c.prompt_ms for c in mine)):>12}  "
            f"{_rate(answered, sum(c.predicted_ms for c in mine)):>12}")
    return "\n".join(out)


def as_json(calls: Sequence[Call]) -> list[dict[str, Any]]:
    return [{"task": c.task, "outcome": c.outcome, "seconds": c.seconds,
             "prompt_tokens": c.prompt_tokens, "cached_tokens": c.cached_tokens,
             "completion_tokens": c.completion_tokens, "reask": c.reask,
             "recovered": c.recovered, "rejected": c.rejected, "reasons": dict(c.reasons)}
            for c in calls]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.eval_local.calls CALLS.jsonl``: the table of a kept record."""
    import sys

    paths = list(sys.argv[1:] if argv is None else argv)
    if len(paths) != 1 or not Path(paths[0]).is_file():
        print("memfleet: usage: python -m bench.eval_local.calls CALLS.jsonl", file=sys.stderr)
        return 2
    print(table(read_calls(Path(paths[0]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
