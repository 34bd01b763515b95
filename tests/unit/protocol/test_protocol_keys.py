"""worker.protocol.keys and key_table: every Redis key in one table, and nobody
but keys.py spelling one.

- No Python module of worker/, api_stub/ or conformance/ but keys.py holds a key
  name (key_table.py builds its patterns from keys.py's prefixes): no
  string literal starts with a key's prefix, ``memfleet:`` or ``arq:``. (A
  ``memfleet: ...`` message, with its space, is not a key; neither is the erase
  fence's HMAC domain, a bytes literal in worker/store/fence_key.py.) One
  exception: MEMFLEET_QUEUE_NAME's default in worker/config.py, which may import
  no package (tests/unit/repo/test_import_boundaries.py); it equals keys.DEFAULT_QUEUE.
- Every key of the table is in docs/protocol.md, and every key SessionRef and
  keys.py's builders make is a key of the table.
- Lua scripts take their keys as KEYS[] and hard-code no key name; the few that
  build keys from prefixes passed in ARGV are the ones docs/protocol.md lists.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import arq.constants

from worker.config import Settings
from worker.protocol import key_table, keys
from worker.protocol.keys import SessionRef

ROOT = Path(__file__).resolve().parents[3]
PROTOCOL_MD = ROOT / "docs" / "protocol.md"
SCRIPT_DIRS = (ROOT / "worker" / "protocol" / "lua", ROOT / "worker" / "api", ROOT / "api_stub")
# Scripts that build key names from a prefix passed in ARGV, and which ARGV
# (docs/protocol.md, "Keys a script builds").
BUILT_FROM_ARGV = {
    "enqueue.lua": {7, 8, 16, 17},
    "erase_user.lua": {2, 3, 4, 5, 6, 7, 8},
    "fleet_probe.lua": {1, 2},
    "recover.lua": {2, 4, 5, 6},
    "retire_orphans.lua": {1, 2, 3},
    "portrait_queue.lua": {5, 6},  # the user's portrait refresh (docs/portrait.md)
    "chat_erase_user.lua": {1},  # api_stub: the chat stand-in's erase
}


def _prefixes() -> set[str]:
    return {spec.prefix for spec in key_table.KEYS if spec.prefix} | {"memfleet:", "arq:"}


def _python_sources() -> list[Path]:
    found = [p for d in ("worker", "api_stub", "conformance")
             for p in sorted((ROOT / d).rglob("*.py"))]
    return [p for p in found if p != ROOT / "worker" / "protocol" / "keys.py"]


def _is_key_name(text: str, prefixes: set[str]) -> bool:
    """``text`` starts with a key prefix, and not as the head of a sentence."""
    return any(text.startswith(p) and not text[len(p):len(p) + 1].isspace() for p in prefixes)


def test_no_module_but_keys_spells_a_key_name() -> None:
    prefixes = _prefixes()
    found = []
    for path in _python_sources():
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and _is_key_name(node.value, prefixes)):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert found == [f"worker/config.py:{_queue_default_line()}: {keys.DEFAULT_QUEUE!r}"], \
        "key names outside worker/protocol/keys.py:\n" + "\n".join(found)


def _queue_default_line() -> int:
    lines = (ROOT / "worker" / "config.py").read_text("utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip().startswith("queue_name:"))


def test_the_settings_default_queue_is_the_protocols() -> None:
    assert Settings.model_fields["queue_name"].default == keys.DEFAULT_QUEUE


def test_the_check_would_see_a_key_name() -> None:
    prefixes = _prefixes()
    assert _is_key_name("memfleet:handover:", prefixes)
    assert _is_key_name("memory-task-lock:", prefixes)
    assert _is_key_name("arq:job:", prefixes)
    assert not _is_key_name("memfleet: settings are wrong", prefixes)


def _row(spec: key_table.KeySpec) -> str:
    cells = [f"`{spec.pattern}`", spec.type, spec.writers, spec.readers, spec.lifetime]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def test_every_key_is_in_the_protocol_document_as_the_table_says() -> None:
    text = PROTOCOL_MD.read_text("utf-8")
    missing = [spec.pattern for spec in key_table.KEYS if f"`{spec.pattern}`" not in text]
    assert not missing, f"docs/protocol.md does not list {missing}"
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    differ = [_row(spec) for spec in key_table.KEYS if _row(spec) not in rows]
    assert not differ, ("docs/protocol.md's key table differs from key_table.KEYS:\n"
                        + "\n".join(differ))


def test_the_table_is_whole_and_unique() -> None:
    patterns = [spec.pattern for spec in key_table.KEYS]
    assert len(set(patterns)) == len(patterns)
    types = {"string", "hash", "list", "set", "zset", "stream"}
    for spec in key_table.KEYS:
        assert spec.type in types, spec
        assert spec.writers and spec.readers and spec.lifetime, spec


def _as_regex(pattern: str) -> re.Pattern[str]:
    parts = re.split(r"(\{<user>\}|\{<endpoint>\}|<[a-z ]+>)", pattern)
    body = "".join(r"\{[^}]*\}" if part in ("{<user>}", "{<endpoint>}")
                   else ".+" if part.startswith("<") else re.escape(part) for part in parts)
    return re.compile(body + r"\Z")


def test_every_builder_makes_a_key_of_the_table() -> None:
    session = SessionRef("ada{1}", "s:1")
    built = [
        *session.state_keys, session.lock_key, *keys.user_keys("ada"),
        keys.user_portrait_key("ada"),
        keys.pending_key("q"), keys.claimed_key("q"), keys.waiting_key("q"),
        keys.events_key("q"), keys.workers_key("q"), keys.suspects_key("q"),
        keys.breaker_open_key("q"), keys.breaker_failures_key("q"), keys.breaker_probe_key("q"),
        *(keys.budget_key("0123abcd", part) for part in keys.BUDGET_PARTS),
        keys.arq_job_key("j"), keys.arq_in_progress_key("j"), keys.arq_retry_key("j"),
        keys.api_exports_key("ada"), keys.api_fact_writes_key("ada"),
        session.chat_session_key, keys.chat_sessions_key("ada"),
        keys.chat_turns_key("ada"),
    ]
    regexes = [(spec.pattern, _as_regex(spec.pattern)) for spec in key_table.KEYS
               if not spec.pattern.startswith("<queue>")]
    for key in built:
        matching = [pattern for pattern, regex in regexes if regex.match(key)]
        assert len(matching) == 1, (key, matching)


def test_arq_prefixes_are_arqs() -> None:
    ours = (keys.ARQ_JOB_PREFIX, keys.ARQ_IN_PROGRESS_PREFIX, keys.ARQ_RETRY_PREFIX,
            keys.ARQ_RESULT_PREFIX, keys.ARQ_ABORT, keys.ARQ_HEALTH_CHECK_SUFFIX)
    arqs = (arq.constants.job_key_prefix, arq.constants.in_progress_key_prefix,
            arq.constants.retry_key_prefix, arq.constants.result_key_prefix,
            arq.constants.abort_jobs_ss, arq.constants.health_check_key_suffix)
    assert ours == arqs


def _code(script: Path) -> str:
    """The script without its comments (a '--' inside a string literal is not one here)."""
    return "\n".join(line.split("--", 1)[0] for line in script.read_text("utf-8").splitlines())


def _scripts() -> list[Path]:
    return [p for d in SCRIPT_DIRS for p in sorted(d.glob("*.lua"))]


def test_no_script_hard_codes_a_key_name() -> None:
    prefixes = _prefixes()
    for script in _scripts():
        literals = re.findall(r"'([^']*)'|\"([^\"]*)\"", _code(script))
        for literal in (a or b for a, b in literals):
            assert not _is_key_name(literal, prefixes), f"{script.name}: {literal!r}"


def test_the_scripts_that_build_keys_from_argv_are_the_documented_ones() -> None:
    built = {}
    for script in _scripts():
        found = {int(n) for n in re.findall(r"ARGV\[(\d+)\]\s*\.\.", _code(script))}
        if found:
            built[script.name] = found
    assert built == BUILT_FROM_ARGV
    section = PROTOCOL_MD.read_text("utf-8").split("### Keys a script builds", 1)[1]
    for name in BUILT_FROM_ARGV:
        assert name in section.split("\n## ", 1)[0], name
