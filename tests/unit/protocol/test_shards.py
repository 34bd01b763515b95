"""The shard routing (worker.protocol.shards): the hash other languages implement, byte
for byte (tests/fixtures/protocol/shard_routing.json), how few users a new shard moves,
and the route of a user while a shard is added."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest

from worker.errors import ConfigurationError
from worker.protocol.shards import HOLD, STAY, ShardedRedis, ShardMap, owner, shard_score

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "protocol" / "shard_routing.json"
CASES = json.loads(GOLDEN.read_text(encoding="utf-8"))["cases"]


def _spec_score(shard: str, user_id: str) -> int:
    """docs/protocol.md's definition, written out again from the text."""
    data = shard.encode("utf-8") + bytes([0]) + user_id.encode("utf-8")
    return int(hashlib.sha256(data).hexdigest()[:16], 16)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{'+'.join(c['shards'])}:{c['user_id']!r}")
def test_the_golden_vectors(case: dict[str, object]) -> None:
    shards, user_id = case["shards"], case["user_id"]
    assert isinstance(shards, list) and isinstance(user_id, str)
    scores = case["scores"]
    assert isinstance(scores, dict)
    for name in shards:
        assert format(shard_score(name, user_id), "016x") == scores[name]
        assert _spec_score(name, user_id) == int(scores[name], 16)
    assert owner(user_id, shards) == case["shard"]
    assert max(shards, key=lambda n: int(scores[n], 16)) == case["shard"]


def test_the_golden_file_covers_several_maps_and_awkward_ids() -> None:
    assert len({tuple(c["shards"]) for c in CASES}) >= 4
    assert any(not c["user_id"].isascii() for c in CASES)
    assert Counter(c["shard"] for c in CASES if c["shards"] == ["a", "b"]).keys() == {"a", "b"}


def test_the_order_of_the_map_does_not_matter() -> None:
    for i in range(200):
        assert owner(f"u{i}", ["a", "b", "c"]) == owner(f"u{i}", ["c", "a", "b"])


def test_a_new_shard_takes_about_its_share_and_moves_nobody_else() -> None:
    users = [f"user-{i}" for i in range(3000)]
    before = {u: owner(u, ["a", "b"]) for u in users}
    after = {u: owner(u, ["a", "b", "c"]) for u in users}
    moved = [u for u in users if before[u] != after[u]]
    assert all(after[u] == "c" for u in moved)  # only to the new shard
    assert 0.28 < len(moved) / len(users) < 0.39  # about a third
    spread = Counter(before.values())
    assert min(spread.values()) > 0.45 * len(users)


def test_a_renamed_url_moves_nobody_a_renamed_shard_moves_its_users() -> None:
    users = [f"user-{i}" for i in range(500)]
    assert [owner(u, ["a", "b"]) for u in users] != [owner(u, ["a", "x"]) for u in users]


def test_no_shard_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        owner("u1", [])


def _mover(shard_map: ShardMap) -> str:
    return next(f"u{i}" for i in range(1000) if shard_map.route(f"u{i}").moving)


def _stayer(shard_map: ShardMap) -> str:
    return next(f"u{i}" for i in range(1000) if not shard_map.route(f"u{i}").moving)


def test_routes_while_a_shard_is_added() -> None:
    settled = ShardMap(("a", "b"))
    pending = ShardMap(("a", "b", "c"), pending=frozenset({"c"}))
    joining = ShardMap(("a", "b", "c"), joining=frozenset({"c"}))
    final = ShardMap(("a", "b", "c"))
    mover, stayer = _mover(joining), _stayer(joining)
    assert settled.route(mover).home == pending.route(mover).home == joining.route(mover).home
    assert pending.route(mover).mode == STAY and joining.route(mover).mode == HOLD
    assert joining.route(mover).target == final.route(mover).home == "c"
    assert joining.route(mover).shards == (joining.route(mover).home, "c")
    assert joining.route(stayer).mode is None and joining.route(stayer).shards == (
        settled.route(stayer).home,)
    assert not final.route(mover).moving


def test_a_sharded_redis_refuses_a_map_with_nothing_settled() -> None:
    with pytest.raises(ConfigurationError):
        ShardedRedis({"a": object()}, joining=["a"])
    with pytest.raises(ConfigurationError):
        ShardedRedis({"a": object()}, pending=["z"])
    with pytest.raises(ConfigurationError):
        ShardedRedis({})
