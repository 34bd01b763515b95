"""The cost per user turn on the local model, per system: pure, from the endpoint's record.

Every system reaches the one endpoint under a base URL of its own
(``/sys/NAME/v1``, serve.py), so each recorded call names the system that made it.
A system's cost is the sum over its calls: chat calls, prompt tokens (and how many of
them llama.cpp had cached from the call before), answer tokens, the model's seconds
(the call's wall time at the endpoint, one slot, so no call waits on another system's),
and the texts it had embedded. Divided by the user turns of the scenarios run, it is
the cost per user turn.

Coalescing: the eval hands a session over after each user turn, as a chat server does,
and memfleet commits once per step (a session's end, or each turn where a scenario
says ``commit_each_turn``), so one extraction serves every user turn of its slice.
mem0 is given one ``Memory.add`` per memfleet commit, the same slices: its calls
serve the same turns. ``turns per commit`` says how many user turns one commit (one
add) served; ``turns per call`` how many each model call did.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.eval_local.calls import Call
from worker.eval.run import plan_steps
from worker.eval.suite import Scenario


def workload(scenarios: Iterable[Scenario]) -> tuple[int, int]:
    """(user turns, commits): each user turn is one hand-over; a step is one commit."""
    steps = [step for s in scenarios for step in plan_steps(s)]
    return sum(len(step) for step in steps), len(steps)


@dataclass(slots=True)
class Cost:
    system: str
    user_turns: int
    commits: int  # memfleet's commits, mem0's adds: the slices the model was given
    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    embedded: int = 0  # texts embedded
    by_task: Counter[str] = field(default_factory=Counter)

    @property
    def uncached_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens

    def per_turn(self, value: float) -> float:
        return value / self.user_turns if self.user_turns else 0.0

    def as_json(self) -> dict[str, Any]:
        return {"system": self.system, "user_turns": self.user_turns, "commits": self.commits,
                "calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "cached_tokens": self.cached_tokens,
                "completion_tokens": self.completion_tokens, "seconds": round(self.seconds, 3),
                "embedded": self.embedded, "by_task": dict(self.by_task)}


def cost_of(system: str, calls: Iterable[Call], entries: Iterable[Mapping[str, Any]],
            user_turns: int, commits: int) -> Cost:
    """``system``'s cost: its judged chat ``calls`` (already its own) and the embeddings
    requests among the record's ``entries`` that name it."""
    cost = Cost(system, user_turns, commits)
    for call in calls:
        cost.calls += 1
        cost.prompt_tokens += call.prompt_tokens
        cost.cached_tokens += call.cached_tokens
        cost.completion_tokens += call.completion_tokens
        cost.seconds += call.seconds
        cost.by_task[call.task] += 1
    cost.embedded = sum(int(e.get("embeddings") or 0) for e in entries
                        if "embeddings" in e and str(e.get("system") or "") == system)
    return cost


def table(costs: Sequence[Cost]) -> str:
    """One row per system: per user turn, then the coalescing."""
    head = ("system", "user turns", "commits", "calls", "calls/turn", "prompt tok/turn",
            "cached/turn", "uncached/turn", "answer tok/turn", "model s/turn",
            "embedded/turn", "turns/commit", "turns/call")
    rows: list[tuple[str, ...]] = [head]
    for c in costs:
        rows.append((
            c.system, str(c.user_turns), str(c.commits), str(c.calls),
            f"{c.per_turn(c.calls):.2f}", f"{c.per_turn(c.prompt_tokens):.0f}",
            f"{c.per_turn(c.cached_tokens):.0f}", f"{c.per_turn(c.uncached_tokens):.0f}",
            f"{c.per_turn(c.completion_tokens):.0f}", f"{c.per_turn(c.seconds):.1f}",
            f"{c.per_turn(c.embedded):.1f}",
            f"{c.user_turns / c.commits:.2f}" if c.commits else "-",
            f"{c.user_turns / c.calls:.2f}" if c.calls else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                       for i, (v, w) in enumerate(zip(row, widths, strict=True)))
             for row in rows]
    tasks = [f"{c.system}: " + ", ".join(f"{t} {n}" for t, n in sorted(c.by_task.items()))
             for c in costs if c.by_task]
    return "\n".join([*lines, "", "calls by task (memfleet's passes by name; another "
                      "system's prompts are 'other'):", *(f"  {t}" for t in tasks)])
