"""URLs in log lines, with what can be a credential taken out.

Webhook receivers and model endpoints are often addressed by URLs that carry
their credential: ``https://user:password@host``, a token in the path
(``/services/T0/B0/<secret>``, ``/bot<token>/``) or in the query
(``?token=``, ``?key=``, ``?sig=``). ``redact_url`` keeps what says *which*
endpoint a line is about and drops the rest:

- kept: the scheme, host and port, and the first path segment when it is a
  short word (``/v1``, ``/hook``, ``/api``: at most 12 characters, a letter
  first, at most 2 digits); tokens are long or digit-heavy;
- replaced by ``***``: the user and password, every further path segment, a
  first segment that is not a short word, every query value (names stay:
  which parameters are set helps, and no allow-list of "harmless" values is
  safe, since the names that carry secrets vary from service to service),
  and the fragment.

``redact_urls_in`` applies it to every URL inside a text; the logging filter
and the structlog processor below apply that to every line memfleet writes
(worker.telemetry.configure_logging installs them), including tracebacks.
"""

from __future__ import annotations

import logging
import re
from collections.abc import MutableMapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

HIDDEN = "***"
_SHORT_WORD = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,11}")
_QUERY_NAME = re.compile(r"[A-Za-z0-9_.\[\]-]{1,32}")
# scheme://... up to whitespace, a quote or a bracket that closes a repr.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,15}://[^\s'\"<>`]+")


def _short_word(segment: str) -> bool:
    return bool(_SHORT_WORD.fullmatch(segment)) and sum(c.isdigit() for c in segment) <= 2


def redact_url(url: str) -> str:
    """``url`` with its possible credentials replaced by ``***`` (see the module doc)."""
    if "://" not in url:  # not a URL with a host: nothing of it says which endpoint
        return HIDDEN
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        port = parts.port
    except ValueError:  # an unparseable port or IPv6 literal: nothing of it is shown
        return f"{url.split('://', 1)[0]}://{HIDDEN}"
    if ":" in host:
        host = f"[{host}]"
    userinfo = f"{HIDDEN}@" if "@" in parts.netloc else ""
    netloc = f"{userinfo}{host}" + (f":{port}" if port is not None else "")
    kept = [segment if not segment or (index == 1 and _short_word(segment)) else HIDDEN
            for index, segment in enumerate(parts.path.split("/"))]  # [0]: "" before the "/"
    path = "/".join(kept)
    query = ""
    if parts.query:
        names = [name if _QUERY_NAME.fullmatch(name) else HIDDEN
                 for name, _ in parse_qsl(parts.query, keep_blank_values=True)]
        query = "?" + "&".join(f"{name}={HIDDEN}" for name in names) if names else f"?{HIDDEN}"
    fragment = f"#{HIDDEN}" if parts.fragment else ""
    return f"{parts.scheme}://{netloc}{path}{query}{fragment}"


def redact_urls_in(text: str) -> str:
    """``text`` with every ``scheme://...`` in it redacted."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda match: redact_url(match.group(0)), text)


class RedactUrls(logging.Filter):
    """On a handler: every record's message, traceback and stack redacted before output.

    The message is formatted here (``record.args`` merged in), since the URL is
    usually an argument (httpx: ``"HTTP Request: %s %s"``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a malformed call: logging reports it itself
            return True
        if "://" in message:
            record.msg, record.args = redact_urls_in(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_urls_in(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_urls_in(record.stack_info)
        return True


_PLAIN = (int, float, bool, type(None))


def redact_event(logger: Any, method: str,
                 event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: every value of a line that holds a URL, redacted."""
    for key, value in event.items():
        if isinstance(value, _PLAIN):
            continue
        text = value if isinstance(value, str) else str(value)
        if "://" in text:
            event[key] = redact_urls_in(text)
    return event
