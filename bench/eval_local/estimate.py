"""How long the whole suite would take, from a subset's measured calls.

Calls scale with the commits (runs) a suite plans: the subset's calls per run times
the suite's runs. The seconds per call are the subset's, on the model it ran; for
another model they are worked out from the subset's own tokens per call at that
model's rates (uncached prompt tokens and answer tokens per second), which assumes
the other model writes answers about as long. An estimate, said as one.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench.eval_local.calls import Call

# Measured for Qwen2.5-Coder-1.5B-Instruct Q4_K_M on this machine at one or two threads
# (issue 38): 20-30 prompt tokens/s, 12-21 answer tokens/s; the slow ends.
RATES_1_5B = (20.0, 12.0)


@dataclass(frozen=True, slots=True)
class Estimate:
    runs_measured: int
    runs_full: int
    calls_per_run: float
    calls_full: float
    seconds_per_call: float  # measured, this model
    seconds_full: float  # this model
    seconds_per_call_at: float  # at the given rates
    seconds_full_at: float

    def lines(self, model: str, other: str, rates: tuple[float, float]) -> list[str]:
        return [
            f"{self.runs_measured} runs measured, {self.calls_per_run:.2f} calls per run; "
            f"the suite plans {self.runs_full} runs: about {self.calls_full:.0f} calls",
            f"{model}: {self.seconds_per_call:.1f} s per call measured, so about "
            f"{self.seconds_full / 60:.0f} minutes for memfleet on the whole suite",
            f"{other} at {rates[0]:.0f} prompt and {rates[1]:.0f} answer tokens/s: "
            f"{self.seconds_per_call_at:.1f} s per call for these calls' tokens, so about "
            f"{self.seconds_full_at / 60:.0f} minutes for memfleet on the whole suite",
        ]


def call_seconds_at(call: Call, rates: tuple[float, float]) -> float:
    prompt_rate, answer_rate = rates
    return ((call.prompt_tokens - call.cached_tokens) / prompt_rate
            + call.completion_tokens / answer_rate)


def estimate(calls: Sequence[Call], runs_measured: int, runs_full: int,
             rates: tuple[float, float] = RATES_1_5B) -> Estimate:
    if not calls or runs_measured <= 0:
        raise ValueError("no call measured: nothing to estimate from")
    per_run = len(calls) / runs_measured
    full = per_run * runs_full
    measured = statistics.fmean(c.seconds for c in calls)
    at = statistics.fmean(call_seconds_at(c, rates) for c in calls)
    return Estimate(runs_measured, runs_full, per_run, full, measured, full * measured,
                    at, full * at)


# Before a run: model calls per commit (memfleet: extraction and consolidation, a few
# summaries; mem0 1.x: extraction, then its update pass when facts came out; mem0 2.x:
# one additive extraction) and seconds per call on this machine (issue 38's 6-11 s on
# the 1.5B model; the 0.5B model about 4.5 s, measured by the smoke). A guess, said
# before anything runs.
CALLS_PER_COMMIT = {"memfleet": 2.2, "mem0-1.0.9": 2.0, "mem0-2.2.1": 1.0}
SECONDS_PER_CALL = {"1.5b": 9.0, "0.5b": 4.5}
# A call's length against memfleet's, from the 0.5B smoke: mem0 1.x's prompts are about
# 1,500 and 900 tokens (memfleet's 1,200 and 600); mem0 2.x's extraction prompt is about
# 8,000 tokens, processed once (minutes) and then cached, its answers longer (a guess).
CALL_LENGTH = {"memfleet": 1.0, "mem0-1.0.9": 2.1, "mem0-2.2.1": 6.0}


def before_run(commits: int, systems: Sequence[str], model: str) -> list[tuple[str, float]]:
    """Each system's guessed seconds for ``commits`` commits (or adds) on ``model``."""
    per_call = SECONDS_PER_CALL.get(model, SECONDS_PER_CALL["1.5b"])
    return [(name, commits * CALLS_PER_COMMIT.get(name, 2.0) * per_call
             * CALL_LENGTH.get(name, 1.0)) for name in systems]
