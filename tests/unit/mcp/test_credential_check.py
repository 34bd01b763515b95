"""worker.mcp.http.CredentialCheck: one consent read per credential and user, a pass
remembered for its TTL, a refusal never; the API's statuses become the open's."""

from __future__ import annotations

import httpx
import pytest

from worker.mcp.http import CredentialCheck, Refused

KEY = "mfk_" + "k" * 40


def api(statuses: dict[str, int], seen: list[str]) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        status = statuses.get(request.url.path, 200)
        if status == 200:
            return httpx.Response(200, json={"enabled": True, "chosen": False})
        return httpx.Response(status, json={"detail": "no"})
    return httpx.MockTransport(answer)


async def test_a_pass_is_remembered_per_credential_and_user() -> None:
    seen: list[str] = []
    check = CredentialCheck("http://api.test", api({}, seen), 5.0)
    await check(KEY, "ada")
    await check(KEY, "ada")
    assert seen == ["/users/ada/consent"]
    await check(KEY, "bob")
    await check("mfk_" + "o" * 40, "ada")
    assert len(seen) == 3


async def test_a_pass_expires_and_the_cache_is_bounded() -> None:
    seen: list[str] = []
    check = CredentialCheck("http://api.test", api({}, seen), 5.0, ttl_s=0.0, most=2)
    await check(KEY, "ada")
    await check(KEY, "ada")
    assert len(seen) == 2
    check = CredentialCheck("http://api.test", api({}, seen), 5.0, most=2)
    for user in ("a", "b", "c"):
        await check(KEY, user)
    assert len(check._passed) == 2


@pytest.mark.parametrize(("status", "opens"), [(401, 401), (403, 403), (429, 429),
                                               (503, 503)])
async def test_a_refusal_is_the_opens_status_and_never_remembered(status: int,
                                                                   opens: int) -> None:
    seen: list[str] = []
    check = CredentialCheck("http://api.test", api({"/users/ada/consent": status}, seen), 5.0)
    for _ in range(2):
        with pytest.raises(Refused) as refused:
            await check(KEY, "ada")
        assert refused.value.status == opens
    assert seen.count("/users/ada/consent") >= 2
