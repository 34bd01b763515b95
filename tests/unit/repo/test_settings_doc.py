"""docs/settings.md is complete: a row for every field of worker.config.Settings (the
fleet's, every process's) outside its last section, and one for every field the API
adds (worker.api.settings.ApiSettings) in that section, "The memory API's own
settings"; no row for a setting that does not exist, or in the other process's part;
and each default the doc states plainly is the field's.

The variable column of each table row names one or more `MEMFLEET_*` variables; the
default column says one value for all of them, or one per variable (comma separated),
optionally followed by a remark in parentheses. A plain value is a number, `true` or
`false` (backticked or not), another backticked string, or `unset`/`none` (the field's
default is None). A cell that says anything else ("the chat endpoint's") is prose, and
is checked only when it begins with `unset` ("unset: the extraction model": None).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from worker.api.settings import ApiSettings
from worker.config import Settings

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "settings.md"
VARIABLE = re.compile(r"`(MEMFLEET_[A-Z0-9_]+)`")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
# A remark after the value(s): "86400 (1 day)", "0, 0, 0 (no limit)".
REMARK = re.compile(r"\s*\([^()]*\)\s*$")
PROSE = object()  # a default cell that states no plain value


# The section (a `## ` heading, with its `### ` subsections) of the API's own settings.
API_SECTION = "The memory API's own settings"


def _env_name(field: str) -> str:
    """The variable pydantic-settings reads a field from: an alias as given, or the
    prefix and the field's name (case-insensitive, written in capitals)."""
    info = ApiSettings.model_fields[field]
    alias = info.validation_alias or info.alias
    if alias is not None:
        assert isinstance(alias, str), f"{field}: only a plain alias is understood here"
        return alias.upper()
    assert not ApiSettings.model_config.get("case_sensitive")
    return (str(ApiSettings.model_config.get("env_prefix", "")) + field).upper()


# Every variable, the fleet's and the API's own, and its field (of ApiSettings, which
# has both); then each process's part.
FIELDS = {_env_name(name): name for name in ApiSettings.model_fields}
FLEET = {_env_name(name) for name in Settings.model_fields}
API_OWN = set(FIELDS) - FLEET


def _rows(text: str) -> list[tuple[int, list[str], str, bool]]:
    """Each table row's variables and default cell, with its line number and whether
    it is in the API's own section: header and separator rows, and rows of other
    tables, are left out."""
    rows = []
    in_api = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("## "):
            in_api = line[3:].strip() == API_SECTION
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        names = VARIABLE.findall(cells[0])
        if names:
            rows.append((number, names, cells[1] if len(cells) > 1 else "", in_api))
    return rows


def _value(token: str) -> Any:
    """One plain value of a default cell, or PROSE."""
    if NUMBER.fullmatch(token.strip("`")):
        return float(token.strip("`"))
    if token.strip("`") in ("true", "false"):
        return token.strip("`") == "true"
    if token in ("unset", "none"):
        return None
    if len(token) > 2 and token[0] == token[-1] == "`" and "`" not in token[1:-1]:
        return token[1:-1]
    return PROSE


def _stated(cell: str, count: int) -> list[Any] | None:
    """The plain default of each of a row's `count` variables, or None when the cell
    is prose (or empty)."""
    if re.match(r"unset(?!\s*,)", cell):
        return [None] * count  # "unset: the extraction model", "unset (the exporter: 9464)"
    values = [_value(t.strip()) for t in REMARK.sub("", cell).split(",")]
    if not cell or PROSE in values:
        return None
    if len(values) == 1:
        return values * count
    assert len(values) == count, (
        f"{cell!r}: state one default for the row's {count} variables, or one each")
    return values


def _default(field: str) -> Any:
    default = ApiSettings.model_fields[field].default
    if isinstance(default, SecretStr):
        return default.get_secret_value()
    if isinstance(default, Path):
        return str(default)
    return default


def _same(stated: Any, default: Any) -> bool:
    if isinstance(stated, float) and not isinstance(default, bool):
        return isinstance(default, int | float) and float(default) == stated
    return type(stated) is type(default) and stated == default


ROWS = _rows(DOC.read_text("utf-8"))
DOCUMENTED = [name for _, names, _, _ in ROWS for name in names]
DOCUMENTED_FLEET = {name for _, names, _, in_api in ROWS if not in_api for name in names}
DOCUMENTED_API = {name for _, names, _, in_api in ROWS if in_api for name in names}


def test_the_rows_are_read() -> None:
    # A change of the table's shape must not leave this file checking nothing.
    assert len(DOCUMENTED_FLEET) > 50
    assert len(DOCUMENTED_API) > 20


def test_every_setting_has_a_row() -> None:
    missing = sorted(set(FIELDS) - set(DOCUMENTED))
    assert not missing, ("add to docs/settings.md (worker/config.py or "
                         f"worker/api/settings.py defines them): {missing}")


def test_every_row_names_a_setting() -> None:
    unknown = sorted(set(DOCUMENTED) - set(FIELDS))
    assert not unknown, ("docs/settings.md names settings neither worker/config.py nor "
                         f"worker/api/settings.py defines: {unknown}")


def test_each_process_settings_are_in_its_part() -> None:
    # The API's own under API_SECTION; the fleet's, every process's, in the others.
    misplaced = sorted((DOCUMENTED_FLEET & API_OWN) | (DOCUMENTED_API & FLEET))
    assert not misplaced, (f"docs/settings.md: the API's own settings go under "
                           f"'## {API_SECTION}', and only they: {misplaced}")


def test_each_setting_has_one_row() -> None:
    twice = sorted({name for name in DOCUMENTED if DOCUMENTED.count(name) > 1})
    assert not twice, f"docs/settings.md has more than one row for: {twice}"


@pytest.mark.parametrize(("line", "names", "cell"), [row[:3] for row in ROWS],
                         ids=[",".join(names) for _, names, _, _ in ROWS])
def test_a_plainly_stated_default_is_the_fields(line: int, names: list[str], cell: str) -> None:
    stated = _stated(cell, len(names))
    if stated is None:
        return
    for name, value in zip(names, stated, strict=True):
        if name not in FIELDS:
            continue  # test_every_row_names_a_setting says so
        default = _default(FIELDS[name])
        assert _same(value, default), (
            f"docs/settings.md:{line}: {name} is documented as {cell!r}, "
            f"but its default is {default!r}")


@pytest.mark.parametrize(("cell", "count", "stated"), [
    ("`rules`", 1, ["rules"]),
    ("4, 2", 2, [4.0, 2.0]),
    ("0, 0, 0 (no limit)", 3, [0.0, 0.0, 0.0]),
    ("86400 (1 day)", 1, [86400.0]),
    ("`false`", 1, [False]),
    ("`'none'`", 1, ["'none'"]),
    ("`none`, unset", 2, ["none", None]),
    ("unset: the extraction model", 1, [None]),
    ("unset (the exporter: 9464)", 1, [None]),
    ("the chat endpoint's", 2, None),
    ("", 2, None),
])
def test_the_default_cells_are_read(cell: str, count: int, stated: list[Any] | None) -> None:
    assert _stated(cell, count) == stated
