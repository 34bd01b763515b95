"""Bring a database to the schema this code ships, under a Postgres advisory lock.

schema/ holds three kinds of file:

- ``baseline.sql``: every table and index as they stand, for a new database,
  recorded as migration ``BASELINE_VERSION``. Databases migrated before the
  baseline existed already hold versions 1..BASELINE_VERSION and skip it.
- ``NNNN_name.sql`` (NNNN above the baseline): changes, applied once each, in
  order. A recorded migration whose file changed since is refused.
- ``routines/*.sql``: functions (``CREATE OR REPLACE``), applied after the
  migrations whenever their text differs from what the database last got, so
  a function is defined in one file and changed in place.

Ten replicas running ``memfleet migrate`` together queue on the lock; each
then finds everything recorded and does nothing.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import asyncpg

from worker.errors import ConfigurationError, StoreError, StoreUnavailable
from worker.store import queries
from worker.store.pool import connection_failure

# How long `memfleet migrate` waits for PostgreSQL to take its connection (a server
# that does not answer: a wrong host behind a firewall) before it says so.
CONNECT_TIMEOUT_S = 10.0

# The last migration of the history that baseline.sql sums up.
BASELINE_VERSION = 4
_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


@dataclass(frozen=True, slots=True)
class Routine:
    name: str
    sql: str


@dataclass(frozen=True, slots=True)
class SchemaFiles:
    baseline: Migration
    migrations: tuple[Migration, ...]  # above the baseline, in order
    routines: tuple[Routine, ...]


def default_schema_dir() -> Path:
    """schema/ as the wheel ships it (the package ``memfleet_schema``), or in a checkout."""
    try:
        return Path(str(resources.files("memfleet_schema")))
    except ModuleNotFoundError:  # a checkout run without installing it
        return Path(__file__).resolve().parents[2] / "schema"


def load_schema(schema_dir: Path) -> SchemaFiles:
    # Loud, never "up to date": an install that lost schema/ must not pass for migrated.
    baseline_path = schema_dir / "baseline.sql"
    if not baseline_path.is_file():
        raise ConfigurationError(f"no schema at {schema_dir} (baseline.sql is missing)")
    migrations = []
    for path in sorted(schema_dir.glob("*.sql")):
        if path.name == "baseline.sql":
            continue
        match = _FILE.match(path.name)
        if match is None:
            raise ConfigurationError(f"{path.name}: migration files are named NNNN_name.sql")
        if int(match[1]) <= BASELINE_VERSION:
            raise ConfigurationError(f"{path.name}: numbered at or below the baseline")
        migrations.append(Migration(int(match[1]), match[2], path.read_text("utf-8")))
    versions = [m.version for m in migrations]
    if len(set(versions)) != len(versions):
        raise ConfigurationError(f"two migrations share a number in {schema_dir}")
    routines = tuple(Routine(p.stem, p.read_text("utf-8"))
                     for p in sorted((schema_dir / "routines").glob("*.sql")))
    baseline = Migration(BASELINE_VERSION, "baseline", baseline_path.read_text("utf-8"))
    return SchemaFiles(baseline, tuple(migrations), routines)


# MEMFLEET_PG_PARTITIONS when it is not given: how many hash partitions each
# per-user table gets (schema/0013_partition_by_user.sql, docs/capacity.md).
DEFAULT_PG_PARTITIONS = 16


def render(sql: str, embed_dim: int, pg_partitions: int = DEFAULT_PG_PARTITIONS) -> str:
    return (sql.replace("{embed_dim}", str(int(embed_dim)))
            .replace("{pg_partitions}", str(int(pg_partitions))))


def checksum(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def migrate(
    dsn: str, *, embed_dim: int, pg_partitions: int = DEFAULT_PG_PARTITIONS,
    schema_dir: Path | None = None,
) -> list[str]:
    """Apply what is missing; return the names applied (empty when up to date).
    ``pg_partitions`` counts only when the partitioning migration runs (at install,
    or on the upgrade that brings it); later, another count is refused."""
    if pg_partitions < 1:
        raise ConfigurationError(f"MEMFLEET_PG_PARTITIONS={pg_partitions}: 1 or more")
    files = load_schema(schema_dir or default_schema_dir())
    sql = queries.load("migrate")
    try:
        conn = await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT_S)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise StoreError(connection_failure(dsn, exc)) from exc
    try:
        await conn.execute(sql["lock"])
        try:
            return await _apply(conn, sql, files, embed_dim, pg_partitions)
        finally:
            await conn.execute(sql["unlock"])
    except asyncpg.PostgresError as exc:
        raise StoreError(f"migration failed: {exc}") from exc
    finally:
        await conn.close()


async def _apply(
    conn: asyncpg.Connection, sql: dict[str, str], files: SchemaFiles, embed_dim: int,
    pg_partitions: int,
) -> list[str]:
    await conn.execute(sql["ensure_tables"])
    done = {row["version"]: row for row in await conn.fetch(sql["applied"])}
    if done:
        await _refuse_other_partitions(conn, sql, pg_partitions)
    applied_now: list[str] = []
    if not done:
        pending = [files.baseline, *files.migrations]
    elif max(done) < BASELINE_VERSION:
        raise ConfigurationError(
            f"the database stopped at migration {max(done):04d}, before the baseline"
            f" ({BASELINE_VERSION:04d}): migrate it with an older memfleet release first"
        )
    else:
        pending = list(files.migrations)
    for migration in pending:
        text = render(migration.sql, embed_dim, pg_partitions)
        if migration.version in done:
            if done[migration.version]["checksum"] != checksum(text):
                raise ConfigurationError(
                    f"migration {migration.version:04d}_{migration.name} was applied"
                    " with different contents (or another MEMFLEET_EMBED_DIM)"
                )
            continue
        async with conn.transaction():
            await conn.execute(text)
            await conn.execute(sql["record"], migration.version, migration.name, checksum(text))
        applied_now.append(f"{migration.version:04d}_{migration.name}")
    routines_done = {row["name"]: row["checksum"] for row in await conn.fetch(sql["routines"])}
    for routine in files.routines:
        if routines_done.get(routine.name) == checksum(routine.sql):
            continue
        async with conn.transaction():
            await conn.execute(routine.sql)
            await conn.execute(sql["record_routine"], routine.name, checksum(routine.sql))
        applied_now.append(f"routines/{routine.name}")
    return applied_now


async def _refuse_other_partitions(
    conn: asyncpg.Connection, sql: dict[str, str], pg_partitions: int
) -> None:
    """The count is fixed when the tables are partitioned: a hash partition's rows
    are those of one remainder, so another count means moving every row. Refused
    rather than ignored, so an operator who asked for 64 does not believe they have them."""
    try:
        recorded = await conn.fetchval(sql["pg_partitions"])
    except asyncpg.UndefinedTableError:  # a database that stopped before the baseline
        return
    if recorded is not None and int(recorded) != pg_partitions:
        raise ConfigurationError(
            f"MEMFLEET_PG_PARTITIONS={pg_partitions} but the database was partitioned into"
            f" {recorded} at install: the count does not change in place (docs/capacity.md);"
            f" set MEMFLEET_PG_PARTITIONS={recorded}")


async def check_schema(
    conn: asyncpg.Connection, embed_dim: int, *, embed_model: str | None = None,
    schema_dir: Path | None = None,
) -> None:
    """Refuse to run on a database that lacks a migration or a routine this code ships
    (it would write the old way; run ``memfleet migrate`` first), or whose fleet embeds
    with another dimension (or, once ``memfleet reembed`` recorded one, another model:
    ``embed_model``, None to check the dimension alone), unless a move to this one is
    under way. Migrations newer than the code are fine: each keeps the previous
    release's calls working."""
    files = load_schema(schema_dir or default_schema_dir())
    sql = queries.load("migrate")
    try:
        applied = {row["version"] for row in await conn.fetch(sql["applied"])}
        stored = await conn.fetchval(sql["embed_dim"])
    except asyncpg.UndefinedTableError as exc:
        raise ConfigurationError("the database is not migrated: run `memfleet migrate`") from exc
    try:
        routines = {row["name"] for row in await conn.fetch(sql["routines"])}
    except asyncpg.UndefinedTableError:  # migrated before routines had a table of their own
        routines = set()
    missing = [f"{m.version:04d}_{m.name}" for m in (files.baseline, *files.migrations)
               if m.version not in applied]
    missing += [f"routines/{r.name}" for r in files.routines if r.name not in routines]
    if missing:
        raise ConfigurationError(
            f"the database lacks {', '.join(missing)}: run `memfleet migrate`")
    if stored is None:
        return
    try:
        fleet_model = await conn.fetchval(sql["embed_model"])
        moves = [(row["model"], row["dim"]) for row in await conn.fetch(sql["moves_under_way"])]
    except asyncpg.UndefinedTableError:  # a database whose newer migrations this code lacks
        fleet_model, moves = None, []
    refusal = embedding_refusal(embed_model, embed_dim, fleet_model, int(stored), moves)
    if refusal is not None:
        raise ConfigurationError(refusal)


async def check_database(
    dsn: str | None, embed_dim: int, *, embed_model: str | None, timeout_s: float,
) -> None:
    """``check_schema`` on a connection of its own; StoreUnavailable, naming the server
    but never the URL's credentials, when it takes no connection within ``timeout_s``."""
    try:
        conn = await asyncpg.connect(dsn, timeout=timeout_s)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise StoreUnavailable(connection_failure(dsn, exc)) from exc
    try:
        await check_schema(conn, embed_dim, embed_model=embed_model)
    finally:
        await conn.close()


def embedding_refusal(
    model: str | None, dim: int, fleet_model: str | None, fleet_dim: int,
    moves: list[tuple[str, int]],
) -> str | None:
    """Why a process embedding with ``model`` at ``dim`` may not run, or None when it may:
    it embeds as the fleet does, or as a move under way (``moves``) is taking it to."""
    if dim == fleet_dim and (model is None or fleet_model is None or model == fleet_model):
        return None
    if any(dim == to_dim and model in (None, to_model) for to_model, to_dim in moves):
        return None
    this = f"MEMFLEET_EMBED_DIM={dim}" if model is None else (
        f"MEMFLEET_EMBED_MODEL={model} MEMFLEET_EMBED_DIM={dim}")
    if fleet_model is None and not moves:
        return (f"{this} but the database was migrated with {fleet_dim}: to change it,"
                " `memfleet reembed` first (docs/operations.md)")
    fleet = f"{fleet_model} at {fleet_dim}" if fleet_model else f"{fleet_dim} dimensions"
    under_way = "".join(f"; a move to {m} at {d} is under way" for m, d in moves)
    return (f"{this} but the fleet embeds with {fleet}{under_way}: move the facts first"
            f" (`memfleet reembed --model {model or 'M'} --dim {dim}`, docs/operations.md)")
