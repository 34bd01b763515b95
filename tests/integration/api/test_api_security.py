"""The API's edges against a caller who tries what they should not, over real HTTP with
real PostgreSQL and Redis. What other files already cover is not repeated here:
test_api_service_keys.py (scopes on the memory routes, one 401 for a wrong, unknown
or malformed key, revocation across processes, no secret in caplog), test_api_handover.py
(the hand-over's scope, its 400 and 413 answers), test_api_limits.py (413 and 422 on
the memory routes), test_api_tokens.py (refused tokens). Here: the routes of the
hand-over's status, wait and events against revoked and wrong-scope keys and user
tokens; keys whose scope forbids a route for another user's path; oversized and
malformed hand-over bodies; and no key, secret or token in a real server's log or in
an error body."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis

from tests.api_server import SECRET, api_process, bearer, new_key, token
from tests.integration.api.conftest import key_auth
from worker.api.settings import ApiSettings
from worker.config import Settings
from worker.protocol.keys import DEFAULT_QUEUE
from worker.store.service_keys import ServiceKeyStore

# The API's limit on a request body (MEMFLEET_API_MAX_BODY_BYTES), as the tests serve it.
API_MAX_BODY_BYTES = ApiSettings.model_fields["api_max_body_bytes"].default

REFUSED = "a valid bearer token is required: the service key is not valid (unknown, " \
          "revoked or a wrong secret)"
NO_WATCH_SCOPE = "the service key has neither the handover nor the read scope"
# The new routes, each for user ada: (path, query).
WATCH_ROUTES = [("/users/ada/sessions/s1/status", {}),
                ("/users/ada/sessions/s1/handovers/1/wait", {"timeout_s": 0.1})]
EVENTS = ("/events", {"after": "0"})
HANDOVER = "/users/ada/sessions/s1/handover"
TURN = {"messages": [{"role": "user", "content": "I live in Berlin."}]}


async def test_a_revoked_key_is_refused_on_every_new_route(
    api: httpx.AsyncClient, keys: ServiceKeyStore,
) -> None:
    row, key = await keys.create("revoked", ("handover", "read"))
    assert await keys.revoke(row.id) is not None  # before its first use: nothing cached
    for path, query in [*WATCH_ROUTES, EVENTS]:
        refused = await api.get(path, params=query, headers=key_auth(key))
        assert refused.status_code == 401, (path, refused.text)
        assert refused.json()["detail"] == REFUSED
    refused = await api.post(HANDOVER, json=TURN, headers=key_auth(key))
    assert refused.status_code == 401


async def test_a_key_without_handover_or_read_is_403_on_every_new_route(
    api: httpx.AsyncClient, keys: ServiceKeyStore,
) -> None:
    admin = key_auth(await new_key(keys, "admin"))
    for path, query in [*WATCH_ROUTES, EVENTS]:
        refused = await api.get(path, params=query, headers=admin)
        assert refused.status_code == 403, (path, refused.text)
        assert refused.json()["detail"] == NO_WATCH_SCOPE
    for path, query in WATCH_ROUTES:  # another user's too: a key's scope is per route
        other = path.replace("/ada/", "/bob/")
        assert (await api.get(other, params=query, headers=admin)).status_code == 403


async def test_a_user_token_is_403_on_a_service_only_route_and_on_another_user(
    api: httpx.AsyncClient,
) -> None:
    events = await api.get(EVENTS[0], params=EVENTS[1], headers=bearer("ada"))
    assert events.status_code == 403
    assert "end user's token cannot read the commit events" in events.json()["detail"]
    for path, query in WATCH_ROUTES:
        assert (await api.get(path, params=query, headers=bearer("ada"))).status_code == 200
        theirs = await api.get(path.replace("/ada/", "/bob/"), params=query,
                               headers=bearer("ada"))
        assert theirs.status_code == 403, path
        assert theirs.json()["detail"] == "the token is not for this user"
    for path, query in [*WATCH_ROUTES, EVENTS]:
        assert (await api.get(path, params=query)).status_code == 401, path


async def test_a_keys_scope_forbids_its_routes_for_any_other_users_path(
    api: httpx.AsyncClient, keys: ServiceKeyStore, redis: Redis,
) -> None:
    handover = key_auth(await new_key(keys, "handover"))
    read = key_auth(await new_key(keys, "read"))
    # A key that may hand over may not read what became of bob's memory.
    for path in ("/users/bob/known-facts", "/users/bob/search?q=Berlin", "/users/bob/facts"):
        refused = await api.get(path, headers=handover)
        assert refused.status_code == 403, path
        assert refused.json()["detail"] == "the service key lacks the read scope"
    # A key that may read may not feed bob's memory a conversation.
    refused = await api.post("/users/bob/sessions/s1/handover", json=TURN, headers=read)
    assert refused.status_code == 403
    assert refused.json()["detail"] == "the service key lacks the handover scope"
    assert await redis.zcard(DEFAULT_QUEUE) == 0, "nothing refused was queued"


@pytest.mark.parametrize(("body", "status"), [
    (b"{not json", 422),
    (b'{"messages": "I live in Berlin."}', 422),
    (b'{"messages": [], "secret": 1}', 422),
    (b'{"messages": [{"role": "user", "content": "I live in Berlin."}], '
     b'"listed_at_us": NaN}', 422),
    (b'{"messages": [{"role": "user", "content": NaN}]}', 400),
    (b'{"messages": [{"role": "user", "content": "Berlin \\ud800"}]}', 400),
    (b'{"messages": [{"role": "user\\udfff", "content": "Berlin"}]}', 400),
    (b'{"messages": [{"role": "user", "content": "Berlin"}], "agent_id": "\\ud800"}', 400),
])
async def test_a_malformed_handover_body_is_a_4xx_that_echoes_and_stores_nothing(
    api: httpx.AsyncClient, keys: ServiceKeyStore, redis: Redis, body: bytes, status: int,
) -> None:
    auth = key_auth(await new_key(keys, "handover"))
    refused = await api.post(HANDOVER, content=body, headers=auth | {
        "content-type": "application/json"})
    assert refused.status_code == status, refused.text
    assert "Berlin" not in refused.text
    if status == 400:
        assert refused.json()["error"] == "InvalidHandover"
    assert await redis.zcard(DEFAULT_QUEUE) == 0, "nothing was queued"


async def test_an_oversized_handover_body_is_a_413_at_the_door(
    api: httpx.AsyncClient, keys: ServiceKeyStore, redis: Redis,
) -> None:
    auth = key_auth(await new_key(keys, "handover"))
    content = "Berlin " * (API_MAX_BODY_BYTES // 7 + 1)
    big = await api.post(HANDOVER, json={"messages": [{"role": "user", "content": content}]},
                         headers=auth)

    async def chunked() -> AsyncIterator[bytes]:
        yield b'{"messages": [{"role": "user", "content": "'
        for _ in range(API_MAX_BODY_BYTES // 100_000 + 1):
            yield b"Berlin " * 15_000

    streamed = await api.post(HANDOVER, content=chunked(), headers=auth | {
        "content-type": "application/json"})
    for refused in (big, streamed):
        assert refused.status_code == 413
        assert refused.json() == {"detail": "the request is too large",
                                  "error": "HandoverTooLarge"}
    # Another route's door says the same without the hand-over's kind.
    facts = await api.post("/users/ada/facts", json={"text": content}, headers=bearer("ada"))
    assert facts.status_code == 413 and "error" not in facts.json()
    assert await redis.zcard(DEFAULT_QUEUE) == 0


async def test_no_key_secret_or_token_reaches_a_real_servers_log_or_an_error_body(
    settings: Settings, keys: ServiceKeyStore, tmp_path: Path,
) -> None:
    row, key = await keys.create("logged", ("handover",))
    _, admin_key = await keys.create("admin", ("admin",))
    revoked_row, revoked = await keys.create("revoked", ("read",))
    await keys.revoke(revoked_row.id)
    user_token = token("ada")
    secrets = {key.rsplit("_", 1)[1], admin_key.rsplit("_", 1)[1],
               revoked.rsplit("_", 1)[1], user_token, user_token.split(".")[2], SECRET}
    wrong_secret = key[:-8] + ("0" * 8 if not key.endswith("0" * 8) else "1" * 8)
    credentials = [key, admin_key, revoked, wrong_secret, key + "x", user_token,
                   user_token + "x", token("ada", secret=SECRET[::-1])]
    log = tmp_path / "api.log"
    bodies: list[str] = []
    async with api_process(settings, log, log_level="info") as base, \
            httpx.AsyncClient(base_url=base, timeout=30) as api:
        for credential in credentials:
            auth = {"Authorization": f"Bearer {credential}"}
            for method, path, query in (
                    ("GET", "/users/ada/sessions/s1/status", {}),
                    ("GET", "/users/bob/sessions/s1/handovers/1/wait", {"timeout_s": 0.1}),
                    ("GET", "/events", {"after": credential[:20]}),
                    ("POST", HANDOVER, {}),
                    ("GET", "/users/bob/facts", {"q": credential})):
                answer = await api.request(method, path, params=query, headers=auth,
                                           json=TURN if method == "POST" else None)
                if not answer.headers["content-type"].startswith("text/event-stream"):
                    bodies.append(answer.text)
    logged = log.read_text("utf-8", "replace")
    assert "memfleet.api.auth" in logged or "401" in logged, "the capture caught nothing"
    assert row.id in logged, "the key's id is how an operator finds it"
    for leak in secrets | {c for c in credentials if not c.startswith("mfk_")}:
        assert leak not in logged, "a secret in the server's log"
        assert not any(leak in body for body in bodies), "a secret in an error body"


async def test_no_answer_about_a_user_may_be_kept_by_a_browser_or_a_proxy(
    api: httpx.AsyncClient, keys: ServiceKeyStore,
) -> None:
    """Cache-Control: no-store on the memory routes, the hand-over (its hot path too),
    refusals and the status; the panel's own files keep their caching."""
    both = key_auth(await new_key(keys, "handover", "read"))
    answers = [
        await api.get("/users/ada/facts", headers=bearer("ada")),
        await api.get("/users/ada/known-facts", headers=both),
        await api.post(HANDOVER, json=TURN, headers=both),  # the hot path's answer
        await api.post(HANDOVER, json={"messages": "no"}, headers=both),  # FastAPI's 422
        await api.get("/users/ada/facts"),  # 401
        await api.get(WATCH_ROUTES[0][0], headers=both),
    ]
    assert [a.status_code for a in answers] == [200, 200, 202, 422, 401, 200]
    for answer in answers:
        assert answer.headers.get_list("cache-control") == ["no-store"], answer.request.url
    page = await api.get("/panel")
    assert page.status_code == 200
    assert page.headers["cache-control"] != "no-store"
