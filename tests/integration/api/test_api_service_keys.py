"""Service keys over real HTTP against real PostgreSQL: a key acts for any user within
its scopes and no further; a wrong, unknown or revoked key is a 401 that does not say
which; a revoked key stops on every API process within the cache's seconds; an end
user's token keeps to its own user; no key, secret or token reaches the log."""

from __future__ import annotations

import asyncio
import logging
import time

import asyncpg
import httpx
import pytest

from tests.api_server import api_settings, bearer, new_key, running_api, token
from tests.integration.api.conftest import key_auth
from worker.api.service_auth import KEY_CACHE_TTL_S
from worker.config import Settings
from worker.store.service_keys import ServiceKeyStore

REFUSED = "the service key is not valid (unknown, revoked or a wrong secret)"





async def test_a_read_key_reads_any_user_and_changes_nobody(
    api: httpx.AsyncClient, keys: ServiceKeyStore
) -> None:
    # ada's own fact, written with her own token, read by the server's key.
    added = await api.post("/users/ada/facts", json={"text": "Keeps bees"}, headers=bearer("ada"))
    assert added.status_code == 201, added.text
    read = key_auth(await new_key(keys, "read"))
    facts = await api.get("/users/ada/facts", headers=read)
    assert facts.status_code == 200 and facts.json()["count"] == 1
    for path in ("/users/bob/facts", "/users/bob/known-facts", "/users/ada/consent",
                 "/users/ada/held-proposals", "/users/ada/search?q=bees",
                 f"/users/ada/facts/{added.json()['id']}/chain"):
        assert (await api.get(path, headers=read)).status_code == 200, path
    # Changing or handing out a user's memory is admin's.
    for method, path, body in (("POST", "/users/ada/facts", {"text": "Owns a boat"}),
                               ("DELETE", f"/users/ada/facts/{added.json()['id']}", None),
                               ("PUT", f"/users/ada/facts/{added.json()['id']}/pin", None),
                               ("PUT", "/users/ada/consent", {"enabled": False}),
                               ("GET", "/users/ada/export", None),
                               ("DELETE", "/users/ada", None)):
        resp = await api.request(method, path, json=body, headers=read)
        assert resp.status_code == 403, (method, path, resp.text)
        assert resp.json()["detail"] == "the service key lacks the admin scope"
    assert (await api.get("/users/ada/facts", headers=read)).json()["count"] == 1


async def test_an_admin_key_administers_any_user_and_reads_only_with_read(
    api: httpx.AsyncClient, keys: ServiceKeyStore
) -> None:
    admin = key_auth(await new_key(keys, "admin"))
    added = await api.post("/users/bob/facts", json={"text": "Owns a boat"}, headers=admin)
    assert added.status_code == 201, added.text
    assert (await api.get("/users/bob/export", headers=admin)).status_code == 200
    # admin is not read: a key gets exactly the scopes it was made with.
    listed = await api.get("/users/bob/facts", headers=admin)
    assert listed.status_code == 403
    assert listed.json()["detail"] == "the service key lacks the read scope"
    assert (await api.delete("/users/bob", headers=admin)).status_code == 200
    both = key_auth(await new_key(keys, "read", "admin"))
    assert (await api.get("/users/bob/facts", headers=both)).json()["count"] == 0


async def test_a_handover_key_reads_and_changes_nothing(
    api: httpx.AsyncClient, keys: ServiceKeyStore
) -> None:
    handover = key_auth(await new_key(keys, "handover"))
    assert (await api.get("/users/ada/facts", headers=handover)).status_code == 403
    assert (await api.delete("/users/ada", headers=handover)).status_code == 403


async def test_a_wrong_secret_an_unknown_id_or_a_malformed_key_is_one_401(
    api: httpx.AsyncClient, keys: ServiceKeyStore, caplog: pytest.LogCaptureFixture
) -> None:
    key = await new_key(keys, "read")
    assert (await api.get("/users/ada/facts", headers=key_auth(key))).status_code == 200
    key_id, secret = key.split("_")[1], key.split("_")[2]
    wrong_secret = f"mfk_{key_id}_{'0' * 64 if secret != '0' * 64 else '1' * 64}"
    unknown_id = f"mfk_{'0' * 12 if key_id != '0' * 12 else '1' * 12}_{secret}"
    caplog.set_level(logging.INFO, logger="memfleet.api.auth")
    for bad, kind in ((wrong_secret, "wrong_secret"), (unknown_id, "unknown_key")):
        caplog.clear()
        resp = await api.get("/users/ada/facts", headers=key_auth(bad))
        assert resp.status_code == 401, bad
        # The same words either way: the caller learns nothing about which ids exist.
        assert resp.json()["detail"] == f"a valid bearer token is required: {REFUSED}"
        assert f"invalid_token ({kind})" in caplog.text
    for malformed in ("mfk_", f"mfk_{key_id}_{secret}x", f"mfk_{key_id}_{secret.upper()}",
                      f"MFK_{key_id}_{secret}"):
        resp = await api.get("/users/ada/facts", headers=key_auth(malformed))
        assert resp.status_code == 401, malformed
        # MFK_ is no service key: it is tried as a JWT, and is none.
        assert "is not of the form" in resp.json()["detail"] or malformed.startswith("MFK_")


async def test_a_revoked_key_stops_on_every_api_process_within_the_cache_ttl(
    settings: Settings, keys: ServiceKeyStore
) -> None:
    row, key = await keys.create("two processes", ("read",))
    async with running_api(api_settings(settings)) as first, \
            running_api(api_settings(settings)) as second, \
            httpx.AsyncClient(timeout=30) as client:
        urls = [f"{base}/users/ada/facts" for base in (first, second)]
        for url in urls:  # each process has the key in its cache now
            assert (await client.get(url, headers=key_auth(key))).status_code == 200
        assert await keys.revoke(row.id) is not None
        revoked_at = time.monotonic()
        refused: dict[str, float] = {}
        while len(refused) < len(urls) and time.monotonic() - revoked_at < 3 * KEY_CACHE_TTL_S:
            for url in urls:
                if url not in refused and \
                        (await client.get(url, headers=key_auth(key))).status_code == 401:
                    refused[url] = time.monotonic() - revoked_at
            await asyncio.sleep(0.2)
    assert set(refused) == set(urls), refused
    assert max(refused.values()) <= KEY_CACHE_TTL_S + 1, refused


@pytest.mark.chat_standin  # it chats: the stand-in is mounted only when asked
async def test_end_user_tokens_keep_to_their_own_user(
    api: httpx.AsyncClient, keys: ServiceKeyStore
) -> None:
    assert (await api.get("/users/ada/facts", headers=bearer("ada"))).status_code == 200
    for method, path in (("GET", "/users/bob/facts"), ("GET", "/users/bob/known-facts"),
                         ("DELETE", "/users/bob"), ("GET", "/users/bob/export")):
        resp = await api.request(method, path, headers=bearer("ada"))
        assert resp.status_code == 403, (method, path)
        assert resp.json()["detail"] == "the token is not for this user"
    # The chat stand-in speaks for one logged-in user: a server's key is no user.
    key = await new_key(keys, "read", "admin", "handover")
    chat = await api.post("/chat/ada-s1", json={"content": "hi"}, headers=key_auth(key))
    assert chat.status_code == 403
    assert chat.json()["detail"] == "this route takes an end user's token, not a service key"


async def test_last_used_is_recorded_at_most_once_a_minute(
    api: httpx.AsyncClient, keys: ServiceKeyStore, db: asyncpg.Connection
) -> None:
    row, key = await keys.create("last used", ("read",))
    assert row.last_used_at is None
    assert (await api.get("/users/ada/facts", headers=key_auth(key))).status_code == 200
    first = await db.fetchval("SELECT last_used_at FROM service_key WHERE id = $1", row.id)
    assert first is not None
    for _ in range(3):
        assert (await api.get("/users/ada/facts", headers=key_auth(key))).status_code == 200
    assert await db.fetchval("SELECT last_used_at FROM service_key WHERE id = $1",
                             row.id) == first


async def test_no_key_secret_or_token_reaches_the_log(
    api: httpx.AsyncClient, keys: ServiceKeyStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    row, key = await keys.create("logged", ("read",))
    user_token = token("ada")
    secret = key.rsplit("_", 1)[1]
    await api.get("/users/ada/facts", headers=key_auth(key))
    await api.post("/users/ada/facts", json={"text": "x"}, headers=key_auth(key))  # 403
    await api.get("/users/ada/facts", headers=key_auth(key[:-1] + "0"))  # 401 (or right)
    await api.get("/users/ada/facts", headers=key_auth(key + "0"))  # malformed
    await keys.revoke(row.id)
    await api.get("/users/ada/facts", headers={"Authorization": f"Bearer {user_token}"})
    await api.get("/users/bob/facts", headers={"Authorization": f"Bearer {user_token}"})
    await api.get("/users/ada/facts", headers={"Authorization": f"Bearer {user_token}x"})
    logged = caplog.text + "".join(str(r.__dict__) for r in caplog.records)
    assert caplog.records, "the API logged nothing: the capture is not working"
    assert row.id in logged  # the id is how an operator finds the key
    for leak in (secret, secret[:16], user_token, user_token.split(".")[2]):
        assert leak not in logged
