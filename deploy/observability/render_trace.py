"""Render the trace of one memfleet job as a waterfall PNG (docs/trace.png).

    make trace    # or: .venv/bin/python deploy/observability/render_trace.py [--out PATH]

Runs for real, in this process: throwaway embedded PostgreSQL (pgvector) and
Redis-compatible servers in a temporary directory, the openai providers
talking HTTP to the LLM stub (api_stub/llm_stub.py), one warm-up hand-over so
the traced job has facts to consolidate against, then the traced job. Spans
are captured with an InMemorySpanExporter through
``worker.telemetry.setup_telemetry(settings, span_exporter=...)``, exactly
the spans a worker sends to Tempo.

The stub answers in microseconds, which would make the LLM calls invisible
next to PostgreSQL; ``--llm-latency-ms`` (default 600 for chat, a quarter of
it for embeddings) delays its answers so the picture has the proportions of
a hosted model. The title says so. ``--llm-latency-ms 0`` draws the
pipeline's own overhead alone. The stage order in the title is read from the
spans (``stage_order``), so the picture cannot name an order the job did not run.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, Rectangle
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode
from redis.asyncio import Redis

from api_stub.llm_stub import CHAT_PATH, EMBED_PATH, StubServer
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.embedded import EmbeddedPostgres, EmbeddedRedis
from worker.fleet.app import build_worker
from worker.store.migrate import migrate
from worker.telemetry import configure_logging, setup_telemetry

DIM = 256
ROOT = Path(__file__).resolve().parents[2]
FIRST_TURN = [
    {"role": "user", "content": "Hi! My name is Ada and I live in Berlin."},
    {"role": "assistant", "content": "Nice to meet you, Ada."},
    {"role": "user", "content": "I use Postgres at work."},
    {"role": "assistant", "content": "Good choice."},
]
SECOND_TURN = [
    *FIRST_TURN,
    {"role": "user", "content": "I moved to Lisbon last month."},
    {"role": "assistant", "content": "How is Lisbon?"},
    {"role": "user", "content": "We switched from Postgres to SQLite. I like hiking."},
    {"role": "assistant", "content": "Noted."},
]


async def drain(settings: Settings, exporter: InMemorySpanExporter | None) -> None:
    telemetry = setup_telemetry(settings, span_exporter=exporter) if exporter else None
    worker = build_worker(settings, burst=True, poll_delay=0, telemetry=telemetry)
    try:
        await worker.main()
    finally:
        await worker.close()


async def capture(
    settings: Settings, stub: StubServer, latency_ms: int
) -> tuple[list[ReadableSpan], ReadableSpan]:
    """Spans of the traced job and the hand-over's PRODUCER span."""
    redis = Redis.from_url(settings.redis_url or "")
    try:
        await schedule_memory_persistence(redis, "trace-session", "trace-user", FIRST_TURN,
                                          queue_name=settings.queue_name)
        await drain(settings, None)
        if latency_ms:
            for task in ("fact_extraction", "memory_consolidation", "session_summary"):
                stub.add_fault("latency_ms", latency_ms=latency_ms, path=CHAT_PATH, task=task)
            stub.add_fault("latency_ms", latency_ms=latency_ms // 4, path=EMBED_PATH)
        exporter = InMemorySpanExporter()
        telemetry = setup_telemetry(settings, span_exporter=exporter)
        await schedule_memory_persistence(redis, "trace-session", "trace-user", SECOND_TURN,
                                          queue_name=settings.queue_name,
                                          tracer=telemetry.tracer)
        await asyncio.sleep(0.05)  # a queue wait, as in production, so the link shows
        await drain(settings, exporter)
    finally:
        await redis.aclose()
    spans = list(exporter.get_finished_spans())
    (producer,) = [s for s in spans if s.kind is SpanKind.PRODUCER]
    return [s for s in spans if s is not producer], producer


def stage_order(spans: Sequence[ReadableSpan]) -> str:
    """The job's stages as they ran: ``▸`` one after another, ``‖`` beside the stage that
    started the step (a stage that starts before that one ends)."""
    stages = sorted((s for s in spans if s.name.startswith("memfleet.")),
                    key=lambda s: s.start_time or 0)
    steps: list[list[ReadableSpan]] = []
    for span in stages:
        if steps and (span.start_time or 0) < (steps[-1][0].end_time or 0):
            steps[-1].append(span)
        else:
            steps.append([span])
    return " ▸ ".join(" ‖ ".join(s.name.removeprefix("memfleet.") for s in step)
                      for step in steps)


# ---- drawing -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Row:
    span: ReadableSpan
    depth: int


def ordered(spans: Sequence[ReadableSpan]) -> list[Row]:
    """Depth-first by start time: each span under its parent, as a trace viewer shows them."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans if s.context}
    for span in spans:
        parent = span.parent.span_id if span.parent and span.parent.span_id in ids else None
        by_parent.setdefault(parent, []).append(span)
    rows: list[Row] = []

    def visit(parent: int | None, depth: int) -> None:
        for span in sorted(by_parent.get(parent, []), key=lambda s: s.start_time or 0):
            rows.append(Row(span, depth))
            visit(span.context.span_id if span.context else None, depth + 1)

    visit(None, 0)
    return rows


COLORS = {
    "producer": "#8c6bb1", "job": "#4c72b0", "stage": "#55a868", "llm": "#dd8452",
    "db": "#c44e52", "error": "#d62728",
}


def category(span: ReadableSpan) -> str:
    if span.status.status_code is StatusCode.ERROR:
        return "error"
    if span.kind is SpanKind.PRODUCER:
        return "producer"
    if span.kind is SpanKind.CONSUMER:
        return "job"
    attributes = span.attributes or {}
    if "gen_ai.operation.name" in attributes:
        return "llm"
    if "db.system.name" in attributes and span.kind is SpanKind.CLIENT:
        return "db"
    return "stage"


def detail(span: ReadableSpan) -> str:
    """A few attributes that say what the span did (never user content: there is none)."""
    # Spans carry only str, int and bool here; str() keeps the typing honest about bytes.
    a = {key: str(value) for key, value in (span.attributes or {}).items()}
    bits: list[str] = []
    if "gen_ai.usage.input_tokens" in a:
        bits.append(f"{a['gen_ai.usage.input_tokens']}→{a['gen_ai.usage.output_tokens']} tokens")
    for key, label in (("memfleet.cursor.case", "cursor"), ("memfleet.slice.length", "slice"),
                       ("memfleet.candidates", "candidates"), ("memfleet.attempt", "attempt"),
                       ("memfleet.neighbors.k", "k"), ("memfleet.outcome", "outcome")):
        if key in a:
            bits.append(f"{label} {a[key]}")
    counts = {e: a.get(f"memfleet.decisions.{e.lower()}", "0") for e in
              ("ADD", "UPDATE", "DELETE", "NONE")}
    decisions = [f"{event} {count}" for event, count in counts.items() if count != "0"]
    if decisions:
        bits.append(", ".join(decisions))
    return "  ·  ".join(bits)


def draw(rows: list[Row], producer: ReadableSpan, out: Path, subtitle: str) -> None:
    t0 = producer.start_time or 0
    all_rows = [Row(producer, 0), *rows]
    end_ms = max(((r.span.end_time or 0) - t0) / 1e6 for r in all_rows)
    height = 0.42 * len(all_rows) + 2.0
    plt.switch_backend("Agg")  # files only: no display on a server
    fig, ax = plt.subplots(figsize=(14, height), dpi=130)
    for i, row in enumerate(all_rows):
        span = row.span
        start = ((span.start_time or 0) - t0) / 1e6
        width = max(((span.end_time or 0) - (span.start_time or 0)) / 1e6, end_ms * 0.002)
        ax.barh(i, width, left=start, height=0.62, color=COLORS[category(span)],
                edgecolor="none")
        duration = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
        note = f"{duration:.1f} ms" if duration >= 1 else f"{duration * 1000:.0f} µs"
        extra = detail(span)
        ax.text(start + width + end_ms * 0.006, i, f"{note}   {extra}" if extra else note,
                va="center", ha="left", fontsize=8, color="#333333")
    labels = ["    " * r.depth + r.span.name for r in all_rows]
    ax.set_yticks(range(len(all_rows)), labels, fontsize=9, family="monospace")
    ax.invert_yaxis()
    ax.set_xlim(0, end_ms * 1.32)  # room for the notes right of the longest bars
    ax.set_xlabel("milliseconds since the hand-over")
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="y", length=0)
    # The job is another trace, linked to the hand-over's span (a span link, not a parent).
    job_index = next(i for i, r in enumerate(all_rows) if r.span.kind is SpanKind.CONSUMER)
    job_start = ((all_rows[job_index].span.start_time or 0) - t0) / 1e6
    ax.add_patch(FancyArrowPatch(
        (((producer.end_time or 0) - t0) / 1e6, 0.3), (job_start, job_index - 0.3),
        arrowstyle="->", linestyle="--", color="#777777", mutation_scale=12,
    ))
    ax.text(job_start + end_ms * 0.01, job_index / 2,
            "span link: the job's own trace names the hand-over; the gap is the queue wait "
            "(here: a burst worker starting)", fontsize=7.5, color="#777777", va="center")
    handles = [Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()]
    ax.legend(handles, ["hand-over (chat server)", "ARQ job", "pipeline stage", "LLM / embeddings",
                        "PostgreSQL query", "error"],
              loc="upper center", bbox_to_anchor=(0.5, -0.1), fontsize=8, frameon=False,
              ncol=6)
    ax.set_title(f"One memfleet job: hand-over, then {stage_order([r.span for r in rows])}"
                 f"  (‖: at the same time)\n{subtitle}", fontsize=10, loc="left")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)


async def main_async(out: Path, latency_ms: int) -> None:
    configure_logging("WARNING")  # the workers' per-job lines are not this command's output
    with tempfile.TemporaryDirectory(prefix="memfleet-trace-") as tmp, \
            StubServer(dim=DIM) as stub:
        pg = EmbeddedPostgres(Path(tmp) / "pg", durable=False)
        redis_server = EmbeddedRedis(Path(tmp) / "redis")
        pg.start()
        try:
            redis_server.start()
            try:
                await migrate(pg.url, embed_dim=DIM)
                settings = Settings(
                    database_url=pg.url, redis_url=redis_server.url, home_dir=Path(tmp) / "home",
                    embed_dim=DIM, llm_provider="openai", llm_base_url=stub.v1,
                    embed_provider="openai", embed_base_url=stub.v1,
                    extract_model="gpt-4o-mini", consolidate_model="gpt-4o-mini",
                    summary_every_user_turns=1,
                    erase_fence_key=secrets.token_hex(32),  # a throwaway fleet's own
                )
                spans, producer = await capture(settings, stub, latency_ms)
            finally:
                redis_server.stop()
        finally:
            pg.stop()
    subtitle = ("real PostgreSQL + pgvector and Redis; OpenAI-compatible LLM stub"
                + (f" answering after {latency_ms} ms (chat) / {latency_ms // 4} ms (embeddings)"
                   if latency_ms else " answering at once"))
    draw(ordered(spans), producer, out, subtitle)
    print(f"wrote {out} ({len(spans) + 1} spans): {stage_order(spans)}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "trace.png")
    parser.add_argument("--llm-latency-ms", type=int, default=600,
                        help="delay of the stub's chat answers (embeddings: a quarter)")
    args = parser.parse_args(argv)
    asyncio.run(main_async(args.out, args.llm_latency_ms))


if __name__ == "__main__":
    main()
