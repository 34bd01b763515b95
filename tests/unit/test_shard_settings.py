"""MEMFLEET_REDIS_SHARDS and its states (worker.config): parsed once, refused in one line
naming the rule (never a URL), and the CLI's exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from pydantic import ValidationError

from worker.config import Settings, settings_error
from worker.protocol.shards import DEFAULT_SHARD as PROTOCOL_DEFAULT_SHARD
from worker.protocol.shards import ShardMap
from worker.redis_shards import DEFAULT_SHARD

A, B = "redis://:s3cret@redis-a:6379/0", "redis://redis-b:6380/1"


def test_one_url_is_the_one_shard_default() -> None:
    settings = Settings(redis_url=A)
    assert settings.redis_shard_entries == ((DEFAULT_SHARD, A),)
    assert DEFAULT_SHARD == PROTOCOL_DEFAULT_SHARD == "default"
    assert ShardMap.from_settings(settings).route("anyone").home == "default"


def test_a_map_in_order_with_commas_or_spaces() -> None:
    for text in (f"a={A},b={B}", f"a={A} b={B}", f" a={A} ,\n b={B} "):
        settings = Settings(redis_shards=text)
        assert settings.redis_shard_entries == (("a", A), ("b", B))
        assert settings.redis_url == A  # the first shard's, for one-Redis commands


def test_states_of_a_shard_being_added() -> None:
    settings = Settings(redis_shards=f"a={A} b={B}", redis_shards_joining="b")
    shard_map = ShardMap.from_settings(settings)
    assert shard_map.settled == ("a",) and shard_map.joining == {"b"}


@pytest.mark.parametrize(("fields", "said"), [
    ({"redis_shards": f"a={A} a={B}"}, "shard 'a' is named twice"),
    ({"redis_shards": f"A={A}"}, "must be 1 to 32 of a-z"),
    ({"redis_shards": f"a {B}"}, "each entry is name=url"),
    ({"redis_shards": "a=http://x"}, "must start with redis://"),
    ({"redis_shards": " , "}, "names no shard"),
    ({"redis_shards": f"a={A}", "redis_url": B}, "disagree"),
    ({"redis_shards": f"a={A} b={B}", "redis_shards_joining": "c"}, "'c', which is not in"),
    ({"redis_shards": f"a={A} b={B}", "redis_shards_joining": "a b"}, "at least one shard"),
    ({"redis_shards": f"a={A} b={B}", "redis_shards_joining": "b",
      "redis_shards_pending": "b"}, "one shard change at a time"),
    ({"redis_url": A, "redis_shards_pending": "b"}, "'b', which is not in"),
])
def test_a_bad_map_is_refused_naming_the_rule_never_the_url(fields: dict[str, str],
                                                             said: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(**fields)  # type: ignore[arg-type]
    line = settings_error(caught.value)
    assert said in line
    assert "s3cret" not in line and "\n" not in line


def test_the_cli_exits_2_in_one_line_on_a_bad_map() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
    env["MEMFLEET_REDIS_SHARDS"] = f"a={A} a={B}"
    done = subprocess.run([sys.executable, "-m", "worker.cli", "shards", "list"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("memfleet: ")
    assert "s3cret" not in done.stderr


def test_the_cli_routes_and_lists_without_secrets() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
    env["MEMFLEET_REDIS_SHARDS"] = f"a={A} b={B}"
    listed = subprocess.run([sys.executable, "-m", "worker.cli", "shards", "list"], env=env,
                            capture_output=True, text=True, timeout=60, check=True)
    assert listed.stdout.splitlines()[0].startswith("a\tsettled\t")
    assert "s3cret" not in listed.stdout
    routed = subprocess.run([sys.executable, "-m", "worker.cli", "shards", "route", "--user",
                             "u1"], env=env, capture_output=True, text=True, timeout=60,
                            check=True)
    assert json.loads(routed.stdout) == {"shard": ShardMap(("a", "b")).route("u1").home,
                                         "moving_to": None, "mode": None}
    bad = subprocess.run([sys.executable, "-m", "worker.cli", "worker", "--shard", "z"],
                         env=env, capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "no such shard" in bad.stderr


def test_the_webhook_sender_needs_a_shard_with_several() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
    env.update({"MEMFLEET_REDIS_SHARDS": f"a={A} b={B}", "MEMFLEET_WEBHOOK_UNSIGNED": "true"})
    for extra, said in (([], "needs --shard NAME"), (["--shard", "z"], "no such shard")):
        done = subprocess.run([sys.executable, "-m", "worker.cli", "webhook", "--url",
                               "http://127.0.0.1:9/hook", *extra], env=env,
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1
