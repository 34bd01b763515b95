"""What the API's integration tests share beyond tests/integration/conftest.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from worker.store.service_keys import ServiceKeyStore


@pytest.fixture
async def keys(database_url: str) -> AsyncIterator[ServiceKeyStore]:
    """The service keys of the test's database (``memfleet keys`` does the same)."""
    store = await ServiceKeyStore.connect(database_url)
    try:
        yield store
    finally:
        await store.aclose()


async def new_key(keys: ServiceKeyStore, *scopes: str) -> str:
    """A fresh service key with these scopes, as ``memfleet keys create`` prints it."""
    _, key = await keys.create(f"chat server ({','.join(scopes)})", scopes)
    return key


def key_auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
