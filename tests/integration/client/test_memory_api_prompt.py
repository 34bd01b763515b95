"""The prompt split through the Python clients (MemoryApi, AsyncMemoryApi) against the
real memory API over HTTP on PostgreSQL: both blocks typed with the stable version,
the stable block's conditional read (None while the version is current), the version
moving after a commit, and another user's blocks refused."""

from __future__ import annotations

import pytest

from tests.api_server import new_key, token
from worker.client import AccessDenied, AsyncMemoryApi, MemoryApi
from worker.client.memory_api_prompt import PromptBlocks, StableBlock
from worker.store.service_keys import ServiceKeyStore

FACTS = ["Lives in Lisbon", "Plays the cello", "Keeps bees on the roof"]


async def test_the_blocking_client_reads_the_split_and_its_version(
    api_url: str, keys: ServiceKeyStore,
) -> None:
    ada = MemoryApi(api_url, token=lambda: token("ada"), timeout_s=30)
    chat = MemoryApi(api_url, service_key=await new_key(keys, "read"), timeout_s=30)
    for text in FACTS:
        ada.add_fact("ada", text)
    blocks = chat.prompt_blocks("ada", "where do I live?")
    assert isinstance(blocks, PromptBlocks) and blocks.stable.count == 3
    assert all(text in blocks.stable.block for text in FACTS)
    assert (blocks.volatile.block, blocks.volatile.count) == ("", 0), "all in the stable"
    assert "total" in blocks.timing_ms
    version = blocks.stable.version
    assert chat.stable_block("ada", known_version=version) is None
    whole = chat.stable_block("ada")
    assert isinstance(whole, StableBlock) and whole.version == version
    ada.add_fact("ada", "Works as a nurse", importance=9)
    changed = chat.stable_block("ada", known_version=version)
    assert changed is not None and changed.version != version
    assert changed.block.splitlines()[1].startswith("- [general] Works as a nurse")
    with pytest.raises(AccessDenied):
        MemoryApi(api_url, token=lambda: token("eve"), timeout_s=30).prompt_blocks("ada")


async def test_the_async_client_reads_the_split_and_its_version(
    api_url: str, keys: ServiceKeyStore,
) -> None:
    async with AsyncMemoryApi(api_url, token=lambda: token("bob"), timeout_s=30) as bob:
        await bob.add_fact("bob", "Plays the cello")
        blocks = await bob.prompt_blocks("bob", "music")
        assert blocks.stable.count == 1 and "Plays the cello" in blocks.stable.block
        assert await bob.stable_block("bob", known_version=blocks.stable.version) is None
        await bob.add_fact("bob", "Keeps bees", pinned=True)
        fresh = await bob.stable_block("bob", known_version=blocks.stable.version)
        assert fresh is not None and fresh.count == 2
        assert "Keeps bees" in fresh.block.splitlines()[1], "pinned first"
