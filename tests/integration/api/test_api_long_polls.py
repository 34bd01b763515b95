"""The caps on long-lived requests (worker.api.long_polls) over real HTTP, real Redis and
PostgreSQL: one caller past its share of waits or event streams gets 429 with
Retry-After while another caller still gets in; the process past its own gets 503;
a slot comes back when its client goes away or its wait ends, so a burst leaks none."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import httpx

from tests.api_server import api_settings, bearer, new_key, running_api
from tests.integration.api.conftest import key_auth
from worker.config import Settings
from worker.store.service_keys import ServiceKeyStore

DEADLINE_S = 10.0
# Time for held requests to be admitted before a probe: a probe sent sooner could
# take a slot first and have a held request refused instead.
SETTLE_S = 1.0


def wait_path(user: str, session: str = "s1") -> str:
    # Hand-over 1 of a session that never had one: a wait lasts its whole timeout_s.
    return f"/users/{user}/sessions/{session}/handovers/1/wait"


@contextlib.asynccontextmanager
async def api(llm: Settings, **caps: int) -> AsyncIterator[httpx.AsyncClient]:
    async with (running_api(api_settings(llm).model_copy(update=caps)) as base_url,
                httpx.AsyncClient(base_url=base_url, timeout=60) as client):
        yield client


async def short_wait(client: httpx.AsyncClient, user: str, auth: dict[str, str]
                     ) -> httpx.Response:
    return await client.get(wait_path(user, "short"), params={"timeout_s": 0.05},
                            headers=auth)


async def until(status: int, attempt: object) -> httpx.Response:
    """Repeat ``attempt`` (a coroutine function) until it answers ``status``: slots
    given back when a client goes are given back a moment later."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        answer: httpx.Response = await attempt()  # type: ignore[operator]
        if answer.status_code == status:
            return answer
        assert time.monotonic() < deadline, (answer.status_code, answer.text)
        await asyncio.sleep(0.05)


def assert_refused(answer: httpx.Response, status: int, error: str) -> None:
    assert answer.status_code == status, answer.status_code
    assert int(answer.headers["Retry-After"]) > 0
    body = answer.json()
    assert body["error"] == error and body["detail"], body


async def hold(client: httpx.AsyncClient, count: int, user: str, auth: dict[str, str]
               ) -> list[asyncio.Task[httpx.Response]]:
    """``count`` waits of 30 s, admitted (none answered) once this returns."""
    held = [asyncio.create_task(client.get(wait_path(user, f"held{i}"),
                                           params={"timeout_s": 30}, headers=auth))
            for i in range(count)]
    await asyncio.sleep(SETTLE_S)
    assert not any(task.done() for task in held), [t.result().text for t in held if t.done()]
    return held


async def cancel(tasks: list[asyncio.Task[httpx.Response]]) -> None:
    for task in tasks:
        task.cancel()  # the client goes away: httpx closes the connection
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_user_past_its_share_of_waits_gets_429_and_others_still_get_in(
    llm: Settings, keys: ServiceKeyStore,
) -> None:
    async with api(llm, api_waits_per_user=2, api_waits_per_key=3, api_waits_max=6) as client:
        ada = bearer("ada")
        held = await hold(client, 2, "ada", ada)
        assert_refused(await short_wait(client, "ada", ada), 429, "TooManyLongPolls")
        # Another user, and a service key, still get in.
        assert (await short_wait(client, "bob", bearer("bob"))).status_code == 200
        key = key_auth(await new_key(keys, "read"))
        assert (await short_wait(client, "carol", key)).status_code == 200
        # The key's share: 3, whichever users it waits for.
        by_key = await hold(client, 3, "carol", key)
        assert_refused(await short_wait(client, "dave", key), 429, "TooManyLongPolls")
        # 5 of 6 open: one more user fills the process, the next is a 503.
        eve = await hold(client, 1, "eve", bearer("eve"))
        full = await short_wait(client, "bob", bearer("bob"))
        assert_refused(full, 503, "LongPollsFull")
        for task in (*held, *by_key, *eve):
            assert not task.done(), "the held waits are still open"
        await cancel([*held, *by_key, *eve])


async def test_wait_slots_come_back_when_clients_go_or_waits_end(llm: Settings) -> None:
    async with api(llm, api_waits_per_user=3, api_waits_max=3) as client:
        ada = bearer("ada")
        for _ in range(3):  # bursts of clients that go away: no slot leaks
            held = await hold(client, 3, "ada", ada)
            assert (await short_wait(client, "ada", ada)).status_code == 429
            await cancel(held)
            await until(200, lambda: short_wait(client, "ada", ada))
        for _ in range(3):  # bursts of waits that end by themselves
            ended = [client.get(wait_path("ada", f"e{i}"), params={"timeout_s": 0.3},
                                headers=ada) for i in range(3)]
            answers = await asyncio.gather(*ended)
            assert [a.status_code for a in answers] == [200] * 3
            assert all(a.json()["covered"] is False for a in answers)
        # All three slots are free: three long waits are taken at once.
        await cancel(await hold(client, 3, "ada", ada))


@contextlib.asynccontextmanager
async def stream(client: httpx.AsyncClient, auth: dict[str, str]
                 ) -> AsyncIterator[httpx.Response]:
    async with client.stream("GET", "/events", headers=auth) as answer:
        if answer.status_code != 200:
            await answer.aread()
        yield answer


async def test_a_key_past_its_share_of_streams_gets_429_and_others_still_get_in(
    llm: Settings, keys: ServiceKeyStore,
) -> None:
    async with api(llm, api_event_streams_per_key=2, api_event_streams_max=3) as client:
        one, two, three = [key_auth(await new_key(keys, "read")) for _ in range(3)]
        async with contextlib.AsyncExitStack() as held:
            for _ in range(2):
                assert (await held.enter_async_context(stream(client, one))).status_code == 200
            async with stream(client, one) as refused:
                assert_refused(refused, 429, "TooManyLongPolls")
            async with stream(client, two) as other:
                assert other.status_code == 200
                async with stream(client, three) as full:
                    assert_refused(full, 503, "LongPollsFull")
        # Every stream's client went away: the slots come back, again and again.
        for _ in range(3):
            async with contextlib.AsyncExitStack() as again:
                async def open_one() -> httpx.Response:
                    return await again.enter_async_context(stream(client, one))
                for _ in range(2):
                    await until(200, open_one)
                await until(429, open_one)
