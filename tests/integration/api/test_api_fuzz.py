"""Fuzz every operation of docs/openapi.json, and the chat stand-in's (mounted here,
not published), against the running app (schemathesis).

No response may be a server error or break the document (status code, content
type, headers, body schema). Each operation is fuzzed three ways: as the
path's own user (the handlers run, on seeded facts), with a valid token of
another user (403), and with no or a broken token (401); each with data that
fits the schema and data that does not.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import requests
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.transport import Response
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api_stub.chat_app import create_app
from tests.api_server import api_settings, bearer, running_api
from tests.helpers import drain
from worker.api.app import OPENAPI_PATH
from worker.config import Settings

USER = "fuzz-user"
OWN_EXAMPLES = 50  # per operation and mode, as the path's own user
OTHER_EXAMPLES = 15  # per operation, mode and token variant that must be refused
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


# uvicorn's own answer to bytes its HTTP parser (httptools) refuses as a request, for
# one a control character in a header value: written by the server before any app
# sees a request, and sent by no route (the app answers in JSON). No check of the
# app's document applies to it; anything else, a 400 of the app's included, is checked.
SERVER_REFUSAL = (400, "text/plain; charset=utf-8", "close", b"Invalid HTTP request received.")


def _server_refused(response: requests.Response | Response) -> bool:
    """Whether ``response`` is, byte for byte, uvicorn's refusal of a malformed request.
    ``response``: requests' own, or schemathesis' (``Case.call``'s), whose header values
    are lists."""

    def header(name: str) -> str | None:
        value = response.headers.get(name)
        if isinstance(value, list):
            return value[0] if len(value) == 1 else None
        return value

    return (response.status_code, header("content-type"), header("connection"),
            response.content) == SERVER_REFUSAL


def _sort_key(operation: Any) -> tuple[bool, str, str]:
    # Erasing the user last keeps the seeded facts for every other operation.
    erase = operation.method.upper() == "DELETE" and operation.path == "/users/{user_id}"
    return (erase, operation.path, operation.method)


def _fixed_query(operation: Any) -> dict[str, Any] | None:
    # A long poll waits as long as it is told (up to 30 s): fuzzed, briefly.
    return {"timeout_s": 0.05} if operation.path.endswith("/wait") else None


def _fuzz(base_url: str, fact_ids: list[int], document: dict[str, Any]) -> int:
    """Run the fuzzing (synchronously: schemathesis and hypothesis drive requests)."""
    schema = schemathesis.openapi.from_dict(document)
    operations = sorted((r.ok() for r in schema.get_all_operations()), key=_sort_key)
    session = requests.Session()
    calls = 0
    auth_variants: list[tuple[int, Callable[[Any], dict[str, Any] | None], dict[str, str]]] = [
        (OWN_EXAMPLES, lambda op: {"user_id": USER} if "{user_id}" in op.path else None,
         bearer(USER)),
        (OTHER_EXAMPLES, lambda op: None, bearer("someone-else")),
        (OTHER_EXAMPLES, lambda op: None, {}),
        (OTHER_EXAMPLES, lambda op: None, {"Authorization": "Bearer x.y.z"}),
    ]
    for operation in operations:
        for examples, fixed_path, headers in auth_variants:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                strategy = operation.as_strategy(generation_mode=mode,
                                                 path_parameters=fixed_path(operation),
                                                 query=_fixed_query(operation))
                if "{fact_id}" in operation.path and fixed_path(operation):
                    # Half the time a real fact id, so the handlers' found branches run too.
                    strategy = st.tuples(strategy, st.sampled_from([None, *fact_ids])).map(
                        _with_fact_id
                    )

                try:
                    calls += _run(strategy, base_url, session, headers, examples)
                except Unsatisfiable:
                    # Nothing to make invalid (no body or free parameter): nothing to do.
                    assert mode is GenerationMode.NEGATIVE, operation.path
    return calls


def _run(
    strategy: Any, base_url: str, session: requests.Session, headers: dict[str, str],
    examples: int,
) -> int:
    calls = 0

    @hyp_settings(max_examples=examples, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def run(case: Any) -> None:
        nonlocal calls
        response = case.call(base_url=base_url, session=session, headers=headers, timeout=30)
        calls += 1
        if not _server_refused(response):
            case.validate_response(response, checks=CHECKS, headers=headers)

    run()
    return calls


def _with_fact_id(pair: tuple[Any, int | None]) -> Any:
    case, fact_id = pair
    if fact_id is not None and case.path_parameters is not None:
        case.path_parameters["fact_id"] = fact_id
    return case


async def test_fuzzing_the_openapi_document_finds_no_error(settings: Settings) -> None:
    served = api_settings(settings, chat_standin=True)
    document = create_app(served).openapi()
    published = json.loads(OPENAPI_PATH.read_text("utf-8"))
    assert set(document["paths"]) == {*published["paths"], "/chat/{session_id}"}
    async with running_api(served) as base_url:
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
            for text in ("Lives in Berlin", "Uses Postgres", "Likes jazz"):
                await client.post(f"/users/{USER}/facts", json={"text": text},
                                  headers=bearer(USER))
            for content in ("I live in Oslo.", "I live in Bergen now."):
                await client.post("/chat/fuzz-s1", json={"content": content},
                                  headers=bearer(USER))
                await drain(settings)
        await asyncio.to_thread(_the_server_refusal_is_told_apart, base_url)
        # A fresh database: the seeded rows (and a two-step chain) have the first ids.
        calls = await asyncio.to_thread(_fuzz, base_url, list(range(1, 7)), document)
    assert calls > 1000


def _the_server_refusal_is_told_apart(base_url: str) -> None:
    """What the fuzzing skips is what this uvicorn sends, and only that."""
    with requests.Session() as session:
        refused = session.get(f"{base_url}/events", headers={"Last-Event-ID": "1\x01"},
                              timeout=30)
        assert _server_refused(refused), (refused.status_code, refused.headers, refused.text)
        # ... as the fuzzing sees it: schemathesis' response, which Case.call returns.
        assert _server_refused(Response.from_requests(refused, verify=True))
        # The app's own refusals are checked as ever, and so is a well-formed request.
        for path, headers in (("/events", {"Last-Event-ID": "1\t"}),
                              ("/events", {"Last-Event-ID": "x"}),
                              (f"/users/{USER}/facts", bearer(USER))):
            answered = session.get(f"{base_url}{path}", headers=headers, timeout=30)
            assert not _server_refused(answered), (path, headers, answered.status_code)
