"""Tracing and logging: one span per stage, stage timings for the audit row.

No user content (messages, fact text) goes into spans or logs; ids of
sessions and users appear only hashed.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import structlog
from opentelemetry import trace

TRACER_NAME = "memfleet.worker"


def hashed_id(value: str) -> str:
    """A stable, non-reversible stand-in for a session or user id in telemetry."""
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def configure_logging(level: str = "INFO") -> None:
    """JSON logs on stderr; called once by the entry point."""
    logging.basicConfig(stream=sys.stderr, level=level, format="%(message)s")
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        cache_logger_on_first_use=True,
    )


@dataclass(slots=True)
class StageClock:
    """Opens a span per stage and keeps each stage's milliseconds for the audit row."""

    tracer: trace.Tracer
    timings_ms: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str, **attributes: Any) -> Iterator[trace.Span]:
        started = time.perf_counter()
        with self.tracer.start_as_current_span(f"memfleet.{name}") as span:
            for key, value in attributes.items():
                span.set_attribute(key, value)
            try:
                yield span
            finally:
                elapsed = (time.perf_counter() - started) * 1000
                self.timings_ms[name] = round(self.timings_ms.get(name, 0.0) + elapsed, 3)
