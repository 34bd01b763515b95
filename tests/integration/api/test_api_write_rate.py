"""Manual fact writes, and erases with consent changes, are rate-limited per user, each in
a bucket of its own, across every API process (Redis): a 429 with Retry-After past the
burst; reads and other users are not touched, and fact writes never hold back an erase."""

from __future__ import annotations

import httpx
from redis.asyncio import Redis

from tests.api_server import api_settings, bearer, running_api
from worker.config import Settings

BURST = 5


async def test_fact_writes_past_the_burst_are_429_across_api_processes(
    settings: Settings, redis: Redis
) -> None:
    limited = api_settings(settings).model_copy(update={
        "api_fact_writes_per_minute": 6, "api_fact_write_burst": BURST})
    async with running_api(limited) as url_a, running_api(limited) as url_b, \
            httpx.AsyncClient(base_url=url_a, timeout=30) as a, \
            httpx.AsyncClient(base_url=url_b, timeout=30) as b:
        # Requests without ada's token spend none of her writes.
        for _ in range(BURST * 2):
            resp = await a.post("/users/ada/facts", json={"text": "Likes tea"},
                                headers=bearer("mallory"))
            assert resp.status_code == 403
        # The burst, spent on two processes and on every kind of write.
        added = await a.post("/users/ada/facts", json={"text": "Likes jazz"},
                             headers=bearer("ada"))
        assert added.status_code == 201, added.text
        fact = added.json()["id"]
        writes = [
            b.put(f"/users/ada/facts/{fact}/pin", headers=bearer("ada")),
            a.delete(f"/users/ada/facts/{fact}/pin", headers=bearer("ada")),
            b.put("/users/ada/consent", json={"enabled": True}, headers=bearer("ada")),
            a.post("/users/ada/facts", json={"text": "Lives in Oslo"}, headers=bearer("ada")),
        ]
        for write in writes:
            assert (await write).status_code in (200, 201)
        over = await b.delete(f"/users/ada/facts/{fact}", headers=bearer("ada"))
        assert over.status_code == 429, over.text
        assert 1 <= int(over.headers["retry-after"]) <= 60
        assert (await a.post("/users/ada/facts", json={"text": "Likes tea"},
                             headers=bearer("ada"))).status_code == 429
        # Reads go on, another user writes, and ada can still be forgotten.
        facts = await a.get("/users/ada/facts", headers=bearer("ada"))
        assert facts.status_code == 200 and facts.json()["count"] == 2
        assert (await b.post("/users/bob/facts", json={"text": "Likes tea"},
                             headers=bearer("bob"))).status_code == 201
        assert await redis.keys("memfleet:api-fact-writes:*ada*")
        erased = await a.delete("/users/ada", headers=bearer("ada"))
        assert erased.status_code == 200, erased.text
        assert not await redis.keys("memfleet:api-*ada*"), "the erase leaves no key of ada"


async def test_no_limit_when_the_rate_is_zero(settings: Settings) -> None:
    unlimited = api_settings(settings).model_copy(update={
        "api_fact_writes_per_minute": 0, "api_fact_write_burst": 1})
    async with running_api(unlimited) as url, \
            httpx.AsyncClient(base_url=url, timeout=30) as client:
        for n in range(BURST * 2):
            resp = await client.post("/users/ada/facts", json={"text": f"Likes tea {n}"},
                                     headers=bearer("ada"))
            assert resp.status_code == 201, resp.text


async def test_erases_and_consent_changes_past_their_burst_are_429_across_api_processes(
    settings: Settings, redis: Redis
) -> None:
    limited = api_settings(settings).model_copy(update={
        "api_erases_per_hour": 60, "api_erase_burst": 3})
    async with running_api(limited) as url_a, running_api(limited) as url_b, \
            httpx.AsyncClient(base_url=url_a, timeout=30) as a, \
            httpx.AsyncClient(base_url=url_b, timeout=30) as b:
        # Requests without ada's token spend none of her erases.
        for _ in range(5):
            assert (await a.delete("/users/ada", headers=bearer("mallory"))).status_code == 403
        # The burst, on two processes; a forget through consent is one of them, and the
        # erase it makes does not give the bucket back.
        assert (await a.delete("/users/ada", headers=bearer("ada"))).status_code == 200
        forget = await b.put("/users/ada/consent", json={"enabled": False, "forget": True},
                             headers=bearer("ada"))
        assert forget.status_code == 200, forget.text
        assert (await a.delete("/users/ada", headers=bearer("ada"))).status_code == 200
        over = await b.delete("/users/ada", headers=bearer("ada"))
        assert over.status_code == 429, over.text
        assert 1 <= int(over.headers["retry-after"]) <= 60
        # Another user erases; the buckets outlive the erases, naming nobody but by a
        # keyed hash.
        assert (await b.delete("/users/bob", headers=bearer("bob"))).status_code == 200
        buckets = await redis.keys("memfleet:api-erases:*")
        assert len(buckets) == 2 and not any(b"ada" in key or b"bob" in key
                                             for key in buckets), buckets
        assert not await redis.keys("memfleet:api-*ada*")
        again = await a.put("/users/ada/consent", json={"enabled": True},
                            headers=bearer("ada"))
        assert again.status_code == 429 and int(again.headers["retry-after"]) >= 1
        # Fact writes are another bucket; reads go on.
        assert (await a.post("/users/ada/facts", json={"text": "Likes tea"},
                             headers=bearer("ada"))).status_code == 201
        assert (await a.get("/users/ada/facts", headers=bearer("ada"))).status_code == 200
