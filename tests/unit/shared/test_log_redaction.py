"""URLs in log lines keep scheme, host, port and a short first path segment; userinfo,
deeper path segments, query values and fragments go (worker.log_redaction)."""

from __future__ import annotations

import io
import logging
from typing import Any

import pytest
import structlog

from worker.log_redaction import RedactUrls, redact_event, redact_url, redact_urls_in

SECRETS = ("alice", "PASSWORD9", "PATHTOKEN7f3a", "QUERYTOKEN5b1c", "FRAG")


@pytest.mark.parametrize(("url", "shown"), [
    ("http://alice:PASSWORD9@127.0.0.1:8080/hook/PATHTOKEN7f3a?token=QUERYTOKEN5b1c#FRAG",
     "http://***@127.0.0.1:8080/hook/***?token=***#***"),
    ("https://hooks.slack.com/services/T0AB12CD/B0CD34EF/Xx9yZz",
     "https://hooks.slack.com/services/***/***/***"),
    ("https://api.telegram.org/bot123456:ABC-DEF/sendMessage",
     "https://api.telegram.org/***/***"),  # the token is the first segment: not a short word
    ("http://127.0.0.1:9/tok3f9a0c2e5b7d41a6/v1", "http://127.0.0.1:9/***/***"),
    ("https://api.openai.com/v1", "https://api.openai.com/v1"),
    ("https://api.openai.com/v1/", "https://api.openai.com/v1/"),
    ("http://[::1]:99/hook", "http://[::1]:99/hook"),
    ("redis://:PASSWORD9@redis:6379/0", "redis://***@redis:6379/***"),
    ("http://host:99999/PATHTOKEN7f3a", "http://***"),  # an impossible port: nothing shown
    ("alice:PASSWORD9@host/x", "***"),  # no scheme://: not shown at all
    ("notaurl", "***"),
])
def test_a_url_keeps_only_what_names_the_endpoint(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_every_url_in_a_text_is_redacted_and_the_rest_kept() -> None:
    text = ('HTTP Request: POST http://alice:PASSWORD9@h:1/hook/PATHTOKEN7f3a?token=QUERYTOKEN5b1c'
            ' "HTTP/1.1 200 OK" then URL(\'https://alice@h/v1/PATHTOKEN7f3a\')')
    assert redact_urls_in(text) == ('HTTP Request: POST http://***@h:1/hook/***?token=***'
                                    ' "HTTP/1.1 200 OK" then URL(\'https://***@h/v1/***\')')


def _handler_output(emit: Any) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactUrls())
    logger = logging.getLogger("test.log_redaction")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        emit(logger)
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


URL = "http://alice:PASSWORD9@h:1/hook/PATHTOKEN7f3a?token=QUERYTOKEN5b1c#FRAG"


def test_the_filter_redacts_arguments_and_tracebacks() -> None:
    def emit(logger: logging.Logger) -> None:
        logger.warning('HTTP Request: %s %s "%s"', "POST", URL, "HTTP/1.1 200 OK")
        try:
            raise ConnectionError(f"cannot reach {URL}")
        except ConnectionError:
            logger.exception("failed")

    output = _handler_output(emit)
    assert "http://***@h:1/hook/***?token=***#***" in output
    assert "Traceback" in output and "ConnectionError: cannot reach http://***@h:1" in output
    for secret in SECRETS:
        assert secret not in output


def test_the_structlog_processor_redacts_every_value() -> None:
    out = io.StringIO()
    log = structlog.wrap_logger(structlog.PrintLogger(out), processors=[
        redact_event, structlog.processors.JSONRenderer()])
    log.info(f"posting to {URL}", receiver=URL, nested={"url": URL}, count=3)
    line = out.getvalue()
    assert line.count("http://***@h:1/hook/***?token=***#***") == 3, line
    for secret in SECRETS:
        assert secret not in line
