"""A process refuses to start on a database that is behind the code (or was made for
another embedding dimension), instead of writing the old way."""

from __future__ import annotations

import shutil
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import TEST_EMBED_DIM
from worker.errors import ConfigurationError
from worker.store.migrate import check_schema, default_schema_dir, migrate


async def _check(url: str, embed_dim: int = TEST_EMBED_DIM) -> None:
    conn = await asyncpg.connect(url)
    try:
        await check_schema(conn, embed_dim)
    finally:
        await conn.close()


async def test_unmigrated_database_is_refused(empty_database_url: str) -> None:
    with pytest.raises(ConfigurationError, match="not migrated"):
        await _check(empty_database_url)


async def test_database_behind_the_code_is_refused_until_migrated(
    empty_database_url: str, tmp_path: Path
) -> None:
    shipped = sorted(default_schema_dir().glob("[0-9][0-9][0-9][0-9]_*.sql"))
    older = tmp_path / "schema"
    older.mkdir()
    for path in shipped[:-1]:  # a database migrated by the previous release
        shutil.copy(path, older / path.name)
    await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, schema_dir=older)
    newest = shipped[-1].stem
    with pytest.raises(ConfigurationError, match=f"lacks migration {newest}"):
        await _check(empty_database_url)
    assert await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM) == [newest]
    await _check(empty_database_url)


async def test_other_embedding_dimension_is_refused(database_url: str) -> None:
    await _check(database_url)
    with pytest.raises(ConfigurationError, match=f"migrated with {TEST_EMBED_DIM}"):
        await _check(database_url, embed_dim=TEST_EMBED_DIM * 2)


async def test_a_missing_or_empty_schema_directory_is_an_error(
    empty_database_url: str, tmp_path: Path
) -> None:
    # An install that lost schema/ must never report "up to date".
    with pytest.raises(ConfigurationError, match="no schema directory"):
        await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, schema_dir=tmp_path / "gone")
    with pytest.raises(ConfigurationError, match="no migrations"):
        await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, schema_dir=tmp_path)
