"""Apply schema/NNNN_name.sql in order, once each, under a Postgres advisory lock.

Ten replicas running ``memfleet migrate`` together queue on the lock; each
then finds the migrations already recorded and does nothing. A recorded
migration whose file changed since is refused rather than silently skipped.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from worker.errors import ConfigurationError, StoreError
from worker.store import queries

_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def default_schema_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "schema"


def load_migrations(schema_dir: Path) -> list[Migration]:
    # Loud, never "up to date": an install that lost schema/ must not pass for migrated.
    if not schema_dir.is_dir():
        raise ConfigurationError(f"no schema directory at {schema_dir}")
    found = []
    for path in sorted(schema_dir.glob("*.sql")):
        match = _FILE.match(path.name)
        if match is None:
            raise ConfigurationError(f"{path.name}: migration files are named NNNN_name.sql")
        found.append(Migration(int(match[1]), match[2], path.read_text("utf-8")))
    if not found:
        raise ConfigurationError(f"no migrations in {schema_dir}")
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise ConfigurationError(f"two migrations share a number in {schema_dir}")
    return found


def render(migration: Migration, embed_dim: int) -> str:
    return migration.sql.replace("{embed_dim}", str(int(embed_dim)))


async def migrate(dsn: str, *, embed_dim: int, schema_dir: Path | None = None) -> list[str]:
    """Apply what is missing; return the names applied (empty when up to date)."""
    migrations = load_migrations(schema_dir or default_schema_dir())
    sql = queries.load("migrate")
    try:
        conn = await asyncpg.connect(dsn)
    except (OSError, asyncpg.PostgresError) as exc:
        raise StoreError(f"cannot connect to PostgreSQL: {exc}") from exc
    applied_now: list[str] = []
    try:
        await conn.execute(sql["lock"])
        try:
            await conn.execute(sql["ensure_table"])
            done = {row["version"]: row for row in await conn.fetch(sql["applied"])}
            for migration in migrations:
                text = render(migration, embed_dim)
                checksum = hashlib.sha256(text.encode()).hexdigest()
                if migration.version in done:
                    if done[migration.version]["checksum"] != checksum:
                        raise ConfigurationError(
                            f"migration {migration.version:04d}_{migration.name} was applied"
                            " with different contents (or another MEMFLEET_EMBED_DIM)"
                        )
                    continue
                async with conn.transaction():
                    await conn.execute(text)
                    await conn.execute(
                        sql["record"], migration.version, migration.name, checksum
                    )
                applied_now.append(f"{migration.version:04d}_{migration.name}")
        finally:
            await conn.execute(sql["unlock"])
    except asyncpg.PostgresError as exc:
        raise StoreError(f"migration failed: {exc}") from exc
    finally:
        await conn.close()
    return applied_now


async def check_schema(
    conn: asyncpg.Connection, embed_dim: int, *, schema_dir: Path | None = None
) -> None:
    """Refuse to run on a database that lacks a migration this code ships (it would
    write the old way; run ``memfleet migrate`` first), or that was migrated for
    another embedding dimension. Migrations newer than the code are fine: each keeps
    the previous release's calls working."""
    sql = queries.load("migrate")
    try:
        applied = {row["version"] for row in await conn.fetch(sql["applied"])}
        stored = await conn.fetchval(sql["embed_dim"])
    except asyncpg.UndefinedTableError as exc:
        raise ConfigurationError("the database is not migrated: run `memfleet migrate`") from exc
    missing = [m for m in load_migrations(schema_dir or default_schema_dir())
               if m.version not in applied]
    if missing:
        names = ", ".join(f"{m.version:04d}_{m.name}" for m in missing)
        raise ConfigurationError(f"the database lacks migration {names}: run `memfleet migrate`")
    if stored is not None and int(stored) != embed_dim:
        raise ConfigurationError(
            f"MEMFLEET_EMBED_DIM={embed_dim} but the database was migrated with {stored}"
        )
