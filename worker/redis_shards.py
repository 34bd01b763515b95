"""MEMFLEET_REDIS_SHARDS and its states, as text to parse (worker.config reads them).

A top-level module, like worker.memory_rules: worker.config imports no package.
The routing itself is worker.protocol.shards.
"""

from __future__ import annotations

import re

# The schemes of a shard's URL: redis-py's (worker.config.SERVER_URL_SCHEMES).
REDIS_SCHEMES = ("redis", "rediss", "unix")

# The one shard's name when MEMFLEET_REDIS_URL alone is set (worker.protocol.shards).
DEFAULT_SHARD = "default"
# A shard's name: routing hashes it (docs/protocol.md, "Shards"), so it is short and plain.
SHARD_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


def shard_entries(value: str) -> tuple[tuple[str, str], ...]:
    """MEMFLEET_REDIS_SHARDS as (name, url) pairs, in order; ValueError naming the rule
    broken (a name, never a URL: it may hold a password)."""
    entries: list[tuple[str, str]] = []
    for item in value.replace(",", " ").split():
        name, found, url = item.partition("=")
        if not found or not url:
            raise ValueError("MEMFLEET_REDIS_SHARDS: each entry is name=url, such as "
                             "a=redis://redis-a:6379/0 (comma or space separated)")
        if not SHARD_NAME.fullmatch(name):
            raise ValueError(f"MEMFLEET_REDIS_SHARDS: shard name {name[:40]!r} must be 1 to "
                             "32 of a-z, 0-9, _ and -, starting with a letter or digit")
        if any(name == known for known, _ in entries):
            raise ValueError(f"MEMFLEET_REDIS_SHARDS: shard {name!r} is named twice")
        scheme, found, _ = url.partition("://")
        if not found or scheme.lower() not in REDIS_SCHEMES:
            raise ValueError(f"MEMFLEET_REDIS_SHARDS: shard {name!r}'s URL must start with "
                             "redis://, rediss:// or unix://")
        entries.append((name, url))
    if not entries:
        raise ValueError("MEMFLEET_REDIS_SHARDS is set but names no shard")
    return tuple(entries)


def shard_names(value: str | None, which: str) -> tuple[str, ...]:
    """MEMFLEET_REDIS_SHARDS_<which>: shard names, comma or space separated."""
    names = tuple((value or "").replace(",", " ").split())
    bad = [name for name in names if not SHARD_NAME.fullmatch(name)]
    if bad:
        raise ValueError(f"MEMFLEET_REDIS_SHARDS_{which}: {bad[0][:40]!r} is not a shard name")
    return names
