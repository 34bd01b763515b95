"""MEMFLEET_PG_PARTITIONS: bounded in the settings, filled into schema/0013 by migrate."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from worker.config import Settings
from worker.errors import ConfigurationError
from worker.store.migrate import DEFAULT_PG_PARTITIONS, default_schema_dir, migrate, render


def test_the_setting_is_bounded_and_defaults_to_the_migration_default() -> None:
    assert Settings().pg_partitions == DEFAULT_PG_PARTITIONS == 16
    for wrong in (0, 1025):
        with pytest.raises(ValidationError):
            Settings(pg_partitions=wrong)


def test_the_count_is_filled_into_the_partitioning_migration() -> None:
    (path,) = default_schema_dir().glob("0013_*.sql")
    text = path.read_text("utf-8")
    assert "'{pg_partitions}'" in text
    assert "'4'" in render(text, 8, 4) and "{pg_partitions}" not in render(text, 8, 4)


async def test_migrate_refuses_no_partition_before_it_connects() -> None:
    with pytest.raises(ConfigurationError, match="MEMFLEET_PG_PARTITIONS=0"):
        await migrate("postgresql://nobody@127.0.0.1:1/none", embed_dim=8, pg_partitions=0)
