"""Spans of one job: the tree, the link to the hand-over across processes, no user content."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from pydantic import SecretStr
from redis.asyncio import Redis
from structlog.testing import capture_logs

from tests.helpers import drain, user_msg, worker_env
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.protocol.keys import SessionRef
from worker.telemetry import setup_telemetry
from worker.telemetry_ids import hashed_id

PRIVATE_PLACE = "Zanzibarcity"
PRIVATE_TOOL = "Quuxlang"
CONVERSATION = [user_msg(f"I live in {PRIVATE_PLACE}."), user_msg(f"I use {PRIVATE_TOOL}.")]
STAGES = ["lock", "cursor", "extract", "embed", "summary", "consolidate", "persist"]


def producer_tracer() -> tuple[Any, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("chat-server"), exporter


def dump(spans: tuple[ReadableSpan, ...] | list[ReadableSpan]) -> str:
    return "\n".join(span.to_json() for span in spans)


async def run_one_job(settings: Settings, redis: Redis) -> tuple[Any, ReadableSpan, str]:
    tracer, producer_spans = producer_tracer()
    key = settings.telemetry_id_key.get_secret_value() if settings.telemetry_id_key else None
    await schedule_memory_persistence(redis, "s1", "u1", CONVERSATION,
                                      queue_name=settings.queue_name, tracer=tracer,
                                      telemetry_id_key=key)
    exporter = InMemorySpanExporter()
    telemetry = setup_telemetry(settings, span_exporter=exporter)
    with capture_logs() as logs:
        await drain(settings, telemetry=telemetry)
    (producer,) = producer_spans.get_finished_spans()
    metrics = telemetry.render_metrics().decode()
    return exporter.get_finished_spans(), producer, metrics + json.dumps(logs)


async def test_one_job_yields_the_span_tree_linked_to_its_handover(
    settings: Settings, redis: Redis
) -> None:
    settings = settings.model_copy(update={"summary_every_user_turns": 1,
                                           "telemetry_id_key": SecretStr("test-id-key")})
    spans, producer, _ = await run_one_job(settings, redis)
    assert producer.kind is SpanKind.PRODUCER
    assert producer.attributes["messaging.operation.type"] == "send"
    (job,) = [s for s in spans if s.kind is SpanKind.CONSUMER]
    assert job.name == f"process {settings.queue_name}"
    assert job.attributes["messaging.destination.name"] == settings.queue_name
    assert job.attributes["messaging.operation.type"] == "process"
    assert job.attributes["messaging.message.id"]
    assert job.attributes["memfleet.outcome"] == "committed"
    assert [link.context.span_id for link in job.links] == [producer.context.span_id]
    assert job.links[0].context.trace_id == producer.context.trace_id

    children = [s for s in spans if s.parent and s.parent.span_id == job.context.span_id]
    in_line = [s.name for s in sorted(children, key=lambda s: s.start_time)
               if s.name != "memfleet.summary"]
    assert in_line == [f"memfleet.{stage}" for stage in STAGES if stage != "summary"]
    by_name = {s.name: s for s in spans}
    # The summary is asked beside extraction and consolidation, within the job,
    # after the cursor and done before the commit that stores it.
    summary = by_name["memfleet.summary"]
    assert summary in children
    assert by_name["memfleet.cursor"].end_time <= summary.start_time
    assert summary.end_time <= by_name["memfleet.persist"].start_time
    extract = by_name["memfleet.extract"]
    under = [s for s in spans if s.parent and s.parent.span_id == extract.context.span_id]
    # The extraction's children: the model call (with MEMFLEET_PERSONS on, after the read
    # of the user's known persons, docs/persons.md).
    llm = [s for s in under if "gen_ai.operation.name" in (s.attributes or {})]
    assert llm[0].attributes["gen_ai.operation.name"] == "chat"
    assert llm[0].attributes["gen_ai.request.model"] == "rules-v1"
    assert "gen_ai.usage.input_tokens" in llm[0].attributes
    assert by_name["SELECT memory_fact"].attributes["db.system.name"] == "postgresql"
    assert by_name["memfleet.persist"].attributes["db.operation.name"] == "COMMIT"
    assert by_name["memfleet.persist"].attributes["memfleet.decisions.add"] == 2
    assert by_name["memfleet.cursor"].attributes["memfleet.slice.length"] == 2
    key = b"test-id-key"
    # A session is its pair: its stand-in hashes the pair's key.
    session = SessionRef("u1", "s1").key
    assert job.attributes["memfleet.session"] == hashed_id(session, key), "ids appear only hashed"
    assert job.attributes["memfleet.user"] == hashed_id("u1", key)
    # The same key on both sides: the hand-over's span and the job's name one session alike.
    assert producer.attributes["memfleet.session"] == job.attributes["memfleet.session"]
    # Keyed: hashing a dictionary of likely ids without the key finds nothing.
    unkeyed = hashlib.sha256(b"s1").hexdigest()[:16]
    assert job.attributes["memfleet.session"] != unkeyed


async def test_no_user_content_in_spans_logs_or_metrics_by_default(
    settings: Settings, redis: Redis
) -> None:
    spans, producer, logs_and_metrics = await run_one_job(settings, redis)
    everything = dump([*spans, producer]) + logs_and_metrics
    for private in (PRIVATE_PLACE, PRIVATE_TOOL, '"u1"', '"s1"'):
        assert private not in everything, private


async def test_content_capture_is_an_explicit_setting(settings: Settings, redis: Redis) -> None:
    settings = settings.model_copy(update={"capture_content": True})
    spans, _, _ = await run_one_job(settings, redis)
    assert PRIVATE_PLACE in dump(spans)


def parse_console_spans(text: str) -> list[dict[str, Any]]:
    decoder, spans, index = json.JSONDecoder(), [], 0
    while (start := text.find("{", index)) != -1:
        obj, index = decoder.raw_decode(text, start)
        spans.append(obj)
    return spans


async def test_the_link_crosses_processes(settings: Settings, redis: Redis, tmp_path: Path) -> None:
    tracer, producer_spans = producer_tracer()
    await schedule_memory_persistence(redis, "s1", "u1", CONVERSATION, tracer=tracer)
    (producer,) = producer_spans.get_finished_spans()
    env = worker_env(settings, otel_exporter="console")
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "worker.cli", "worker", "--burst"], env=env,
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    spans = parse_console_spans(done.stdout)
    (job,) = [s for s in spans if s["kind"] == "SpanKind.CONSUMER"]
    (link,) = job["links"]
    assert link["context"]["trace_id"] == f"0x{producer.context.trace_id:032x}"
    assert link["context"]["span_id"] == f"0x{producer.context.span_id:016x}"
    assert PRIVATE_PLACE not in done.stdout + done.stderr
    # Log lines carry the trace ids of the span they were written in.
    log_lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    (finished,) = [line for line in log_lines if line.get("event") == "job finished"]
    assert finished["trace_id"] == job["context"]["trace_id"].removeprefix("0x")
    assert finished["span_id"] == job["context"]["span_id"].removeprefix("0x")
