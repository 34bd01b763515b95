"""`memfleet mcp --http` checks the credential when a session opens: a forged token, an
expired one, a revoked service key are answered 401 at initialize, a key without the
read scope 403, and none of them holds one of the session slots; a good credential
still opens a session and works."""

from __future__ import annotations

import time

from tests.api_server import SECRET, token
from tests.integration.mcp.conftest import (
    INITIALIZE,
    answer,
    http_session,
    mcp_in_process,
    new_key,
    raw_post,
)
from worker.api.auth import AuthConfig, issue_token
from worker.store.service_keys import ServiceKeyStore

SLOTS = 2


def bearer(credential: str, **more: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}", **more}


async def test_refused_credentials_are_refused_at_open_and_hold_no_slot(
    api_url: str, keys: ServiceKeyStore,
) -> None:
    row, revoked = await keys.create("revoked", ("read", "admin"))
    await keys.revoke(row.id)
    forged = token("ada", secret="another-secret-that-is-not-the-apis-0123")  # noqa: S106
    expired = issue_token(AuthConfig(SECRET), "ada", ttl_s=60, now=time.time() - 3_600)
    refused: list[dict[str, str]] = [
        bearer(forged), bearer(expired), bearer(revoked, **{"X-Memfleet-User": "ada"}),
        bearer("mfk_" + "x" * 40, **{"X-Memfleet-User": "ada"}),  # no such key
    ]
    admin_only = await new_key(keys, "admin")
    handover_only = await new_key(keys, "handover")
    out_of_scope = [bearer(k, **{"X-Memfleet-User": "ada"}) for k in (admin_only, handover_only)]
    good_key = await new_key(keys, "read", "admin")
    async with mcp_in_process(api_url, max_sessions=SLOTS) as url:
        for _ in range(SLOTS + 1):  # more tries than slots: had any taken one, the end fails
            for headers in refused:
                response = raw_post(url, headers, INITIALIZE)
                assert response.status_code == 401, response.text
                assert response.headers["www-authenticate"].startswith("Bearer")
                assert "mcp-session-id" not in response.headers
            for headers in out_of_scope:
                response = raw_post(url, headers, INITIALIZE)
                assert response.status_code == 403, response.text
                assert "mcp-session-id" not in response.headers
        # Every slot is still free: SLOTS good sessions open at once and work...
        async with http_session(url, bearer(token("ada"))) as ada, \
                http_session(url, bearer(good_key, **{"X-Memfleet-User": "bob"})) as bob:
            assert answer(await ada.call_tool("save_memory", {"text": "Likes tea"}))["ok"]
            assert answer(await bob.call_tool("list_memory", {}))["count"] == 0
            # ... and the next is the limit's 503 (the count is what it says).
            full = raw_post(url, bearer(token("ada")), INITIALIZE)
            assert full.status_code == 503
        # Closed sessions free their slots; a session's own requests are not re-checked
        # at open, and ada's token still opens (the check's cache, then the API).
        opened = raw_post(url, bearer(token("ada")), INITIALIZE)
        assert opened.status_code == 200 and opened.headers["mcp-session-id"]


async def test_a_service_key_is_checked_for_the_user_it_names(
    api_url: str, keys: ServiceKeyStore,
) -> None:
    key = await new_key(keys, "read")
    async with mcp_in_process(api_url, max_sessions=SLOTS) as url:
        for user in ("ada", "bob"):
            response = raw_post(url, bearer(key, **{"X-Memfleet-User": user}), INITIALIZE)
            assert response.status_code == 200, response.text
        # the third: the limit's 503, not a credential refusal
        assert raw_post(url, bearer(token("cy")), INITIALIZE).status_code == 503
