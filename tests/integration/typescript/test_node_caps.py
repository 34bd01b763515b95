"""The TypeScript HTTP client (clients/typescript/src/test/caps/) against a memory API
whose long-lived requests are capped small: one wait and one event stream at once, per
service key and in all (docs/api.md, "Long-lived requests"), with a real worker
committing. A wait refused with 429 is asked again after Retry-After and answered; one
that gets no slot within its time throws TooManyLongPolls or LongPollsFull (not
HandoverBacklogFull); a subscription whose reconnect finds its dropped stream still
holding the slot waits out the 429 and keeps going."""

from __future__ import annotations

import asyncio
from pathlib import Path

from api_stub.llm_stub import StubServer
from tests.typescript_node import node_fleet, require_build, run_node
from worker.config import Settings


async def test_the_http_client_rides_out_the_long_poll_caps(
    settings: Settings, stub: StubServer, tmp_path: Path,
) -> None:
    require_build()
    async with node_fleet(settings, stub, tmp_path, api_waits_max=1, api_waits_per_key=1,
                          api_event_streams_max=1, api_event_streams_per_key=1) as env:
        done = await asyncio.to_thread(
            run_node, ["--test", "--test-concurrency=1", "clients/typescript/dist/test/caps/"],
            env, 120)
    print(done.stdout)  # node's own report, with -s or on a failure elsewhere
    assert "# fail 0" in done.stdout and "# pass 4" in done.stdout
