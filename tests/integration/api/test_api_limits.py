"""Bad or oversized requests get a 4xx that echoes nothing, never a 5xx, and the logs
carry no id or query; ids follow the hand-over's one rule; tokens expire."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from urllib.parse import quote

import httpx
import jwt
import pytest

from tests.api_server import SECRET, bearer
from worker.api.auth import AuthConfig, issue_token
from worker.errors import InvalidHandover
from worker.memory_rules import id_fault
from worker.protocol.payload import Limits, check_id

PRIVATE = "my secret diagnosis"


@pytest.mark.parametrize("body", [
    b'{"text": "\\ud800 lone surrogate"}',
    b'{"text": "Likes jazz", "importance": NaN}',
    b'{"text": NaN}',
    b'{"text": "Likes jazz", "\\ud800": 1}',
])
async def test_a_lone_surrogate_or_nan_is_a_422_not_a_500(
    api: httpx.AsyncClient, body: bytes
) -> None:
    resp = await api.post("/users/ada/facts", content=body, headers={
        **bearer("ada"), "content-type": "application/json"})
    assert resp.status_code == 422, resp.text
    assert "input" not in resp.json()["detail"][0]


async def test_an_invalid_value_is_not_echoed(api: httpx.AsyncClient) -> None:
    resp = await api.post("/users/ada/facts", json={"text": PRIVATE, "category": PRIVATE},
                          headers=bearer("ada"))
    assert resp.status_code == 422 and PRIVATE not in resp.text
    long_q = await api.get("/users/ada/search", params={"q": PRIVATE * 100},
                           headers=bearer("ada"))
    assert long_q.status_code == 422 and PRIVATE not in long_q.text


async def test_an_oversized_body_or_query_is_a_413_that_echoes_nothing(
    api: httpx.AsyncClient
) -> None:
    big = b'{"text": "' + b"x" * 10_000_000 + b'"}'
    resp = await api.post("/users/ada/facts", content=big, headers={
        **bearer("ada"), "content-type": "application/json"})
    assert resp.status_code == 413 and len(resp.content) < 100

    async def chunked() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield b"x" * 100_000

    resp = await api.post("/users/ada/facts", content=chunked(), headers={
        **bearer("ada"), "content-type": "application/json"})
    assert resp.status_code == 413, "a chunked body is counted as it comes"
    resp = await api.get("/users/ada/search", params={"q": "x" * 20_000},
                         headers=bearer("ada"))
    assert resp.status_code == 413 and "xxx" not in resp.text


@pytest.mark.parametrize("user", ["a\x00b", "a\nb", "a\tb", "x" * 10_000, "\x7f"])
async def test_a_bad_user_id_is_a_4xx_by_the_hand_overs_own_rule(
    api: httpx.AsyncClient, user: str
) -> None:
    assert id_fault(user, Limits().max_id_chars) is not None
    with pytest.raises(InvalidHandover):
        check_id(user, "user_id", Limits())
    # The token's subject is refused as well as the path: a token for such a user is no token.
    resp = await api.post(f"/users/{quote(user, safe='')}/facts",
                          json={"text": "Likes jazz"}, headers=bearer("ada"))
    assert 400 <= resp.status_code < 500, resp.status_code


async def test_tokens_must_expire_within_the_maximum_lifetime(api: httpx.AsyncClient) -> None:
    forever = jwt.encode({"sub": "ada", "iat": 1, "exp": 10**10}, SECRET, algorithm="HS256")
    no_iat = jwt.encode({"sub": "ada", "exp": 10**10}, SECRET, algorithm="HS256")
    for token in (forever, no_iat):
        resp = await api.get("/users/ada/facts", headers={"Authorization": f"Bearer {token}"})
        assert resp.status_code == 401
    day = issue_token(AuthConfig(SECRET), "ada", ttl_s=86_400)
    resp = await api.get("/users/ada/facts", headers={"Authorization": f"Bearer {day}"})
    assert resp.status_code == 200


async def test_the_access_log_names_the_route_never_its_ids_or_query(
    api: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="memfleet.api.access"):
        resp = await api.get("/users/ada-7q/search", params={"q": PRIVATE},
                             headers=bearer("ada-7q"))
        assert resp.status_code in (200, 503)
        await api.get("/users/ada-7q/facts", headers=bearer("ada-7q"))
    lines = [r.getMessage() for r in caplog.records if r.name == "memfleet.api.access"]
    assert any("/users/{user_id}/search" in line for line in lines), lines
    assert not any("ada-7q" in line or "secret" in line for line in lines)


async def test_a_malformed_claim_is_a_401_with_its_reason_and_a_signer_ahead_is_forgiven(
    api: httpx.AsyncClient
) -> None:
    now = int(time.time())
    string_exp = jwt.encode({"sub": "ada", "iat": now, "exp": str(now + 600)}, SECRET,
                            algorithm="HS256")
    resp = await api.get("/users/ada/facts",
                         headers={"Authorization": f"Bearer {string_exp}"})
    assert resp.status_code == 401, resp.text  # it was a 500 with a traceback
    challenge = resp.headers["www-authenticate"]
    assert 'error="invalid_token"' in challenge
    assert 'error_description="the exp claim is not a number of seconds"' in challenge
    assert string_exp not in resp.text and string_exp not in challenge
    # A chat server whose clock runs a few seconds ahead: within the leeway.
    ahead = issue_token(AuthConfig(SECRET), "ada", now=time.time() + 5)
    resp = await api.get("/users/ada/facts", headers={"Authorization": f"Bearer {ahead}"})
    assert resp.status_code == 200, resp.text
