"""Every Lua script opens with its header: what it does, then each KEYS[i] and
ARGV[i] it uses on a line of its own (``-- KEYS[1]  meaning``), numbered 1 to the
highest index its code uses (``-- KEYS: none`` when it uses none), and a line
saying what it returns. Scripts: worker/protocol/lua/, worker/api/ and api_stub/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = sorted([*(ROOT / "worker" / "protocol" / "lua").glob("*.lua"),
                  *(ROOT / "worker" / "api").glob("*.lua"),
                  *(ROOT / "api_stub").glob("*.lua")])


def _header_and_code(script: Path) -> tuple[list[str], str]:
    lines = script.read_text("utf-8").splitlines()
    end = next((i for i, line in enumerate(lines) if not line.startswith("--")), len(lines))
    code = "\n".join(line.split("--", 1)[0] for line in lines[end:])
    return lines[:end], code


def _listed(header: list[str], name: str) -> list[int]:
    return [int(m.group(1)) for line in header
            if (m := re.match(rf"-- {name}\[(\d+)\]\s+\S", line))]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_the_header_names_every_key_and_argument(script: Path) -> None:
    header, code = _header_and_code(script)
    assert len(header) >= 3 and header[0].startswith("-- ") and len(header[0]) > 10, \
        "opens with what it does"
    for name in ("KEYS", "ARGV"):
        used = max((int(n) for n in re.findall(rf"\b{name}\[(\d+)\]", code)), default=0)
        listed = _listed(header, name)
        if used == 0:
            assert f"-- {name}: none" in header, f"{name}: none"
            assert listed == []
        else:
            assert listed == list(range(1, used + 1)), f"{name}[1..{used}], each once, in order"
    assert any(line.startswith("-- Returns") for line in header), "says what it returns"


def test_there_are_scripts() -> None:
    assert len(SCRIPTS) >= 15
