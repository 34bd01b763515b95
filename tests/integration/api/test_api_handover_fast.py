"""The hand-over's hot path (worker.api.handover_fast) against the API on a loopback port:
requests it answers and requests it leaves to FastAPI get the answers the route
always gave, and the access log names the route either way."""

from __future__ import annotations

import json
import logging

import httpx
import pytest
from redis.asyncio import Redis

from tests.api_server import new_key
from tests.integration.api.conftest import key_auth
from worker.api.handover_fast import _fields
from worker.config import Settings
from worker.store.service_keys import ServiceKeyStore

PATH = "/users/ada/sessions/s1/handover"
TURN = {"messages": [{"role": "user", "content": "I keep bees."},
                     {"role": "assistant", "content": "Noted."}]}


def _body(**fields: object) -> bytes:
    return json.dumps(fields).encode()


def test_only_a_body_of_exactly_the_models_shape_is_taken() -> None:
    messages = [{"role": "user", "content": "hi"}]
    assert _fields(_body(messages=messages)) == (messages, None, None)
    assert _fields(_body(messages=[], agent_id="luna", listed_at_us=5)) == ([], "luna", 5)
    assert _fields(_body(messages=[], agent_id=None, listed_at_us=None)) == ([], None, None)
    for other in (_body(messages=[], extra=1), _body(agent_id="a"), _body(messages={}),
                  _body(messages="hi"), _body(messages=[], agent_id=7),
                  _body(messages=[], listed_at_us=True), _body(messages=[], listed_at_us=5.0),
                  _body(messages=[], listed_at_us="5"), _body(messages=[], listed_at_us=-1),
                  _body(messages=[], listed_at_us=2**63), b"[]", b"{not json", b"",
                  b"\xff\xfe", b"[" * 100_000 + b"]" * 100_000):
        assert _fields(other) is None, other[:40]


async def test_a_valid_hand_over_is_answered_as_the_route_declares(
    api: httpx.AsyncClient, keys: ServiceKeyStore, redis: Redis, settings: Settings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    auth = key_auth(await new_key(keys, "handover"))
    with caplog.at_level(logging.INFO, logger="memfleet.api.access"):
        first = await api.post(PATH, json=TURN, headers=auth)
        again = await api.post(PATH, json=TURN | {"agent_id": "luna", "listed_at_us": 1},
                               headers=auth)
    assert first.status_code == again.status_code == 202
    assert first.headers["content-type"] == "application/json"
    assert first.content == b'{"handover_id":%d}' % first.json()["handover_id"]
    assert again.json()["handover_id"] > first.json()["handover_id"] >= 1
    assert await redis.zcard(settings.queue_name) >= 1  # a job for a worker
    lines = [r.getMessage() for r in caplog.records if r.name == "memfleet.api.access"]
    assert lines and all(line.startswith(
        "POST /users/{user_id}/sessions/{session_id}/handover 202 ") for line in lines)


async def test_requests_it_leaves_to_fastapi_get_fastapis_answers(
    api: httpx.AsyncClient, keys: ServiceKeyStore,
) -> None:
    auth = key_auth(await new_key(keys, "handover"))
    reader = key_auth(await new_key(keys, "read"))
    body = json.dumps(TURN).encode()
    json_type = {"Content-Type": "application/json"}
    # The scheme in lower case and a charset: FastAPI takes both, so the hand-over works.
    lower = {"Authorization": auth["Authorization"].replace("Bearer", "bearer")}
    assert (await api.post(PATH, content=body, headers=lower | json_type)).status_code == 202
    charset = {"Content-Type": "application/json; charset=utf-8"}
    assert (await api.post(PATH, content=body, headers=auth | charset)).status_code == 202
    # No Content-Type: FastAPI does not read the body as JSON.
    untyped = await api.post(PATH, content=body, headers=auth)
    assert untyped.status_code == 422
    assert untyped.json()["detail"][0]["type"] == "model_attributes_type"
    extra = await api.post(PATH, json=TURN | {"x": 1}, headers=auth)
    assert extra.status_code == 422 and extra.json()["detail"][0]["loc"] == ["body", "x"]
    coerced = await api.post(PATH, json=TURN | {"listed_at_us": "5"}, headers=auth)
    assert coerced.status_code == 202  # pydantic's lax int, as before
    wrong_scope = await api.post(PATH, json=TURN, headers=reader)
    assert wrong_scope.status_code == 403
    assert wrong_scope.json() == {"detail": "the service key lacks the handover scope"}
    last = auth["Authorization"][-1]
    bad_secret = auth["Authorization"][:-1] + ("1" if last == "0" else "0")
    refused = await api.post(PATH, json=TURN, headers={"Authorization": bad_secret})
    assert refused.status_code == 401 and "WWW-Authenticate" in refused.headers
    bad_id = await api.post("/users/ada/sessions/%20/handover", json=TURN, headers=auth)
    assert bad_id.status_code == 422
