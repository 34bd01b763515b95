"""bench/'s shape (bench/__init__.py): entry points at the top, the revision A/B
harnesses in bench/ab/, what they share in bench/lib/, results in docs/bench/.

- bench/lib/ imports neither an entry point nor a harness: helpers stand alone.
- No entry point imports a harness (bench.ab): the A/B tools are not the benchmarks.
- Every module at bench/'s top is run: a ``__main__`` guard, and named by a make
  target or a page of docs/ (``python -m bench.<name>``).
- No result file (a figure, a report) sits among the code.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench"
PACKAGES = {"ab", "lib", "eval_local", "eval_mem0", "mem0_compare"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _top_modules() -> list[str]:
    return sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "__init__")


def test_bench_has_its_folders() -> None:
    assert {p.name for p in BENCH.iterdir() if p.is_dir() and p.name != "__pycache__"} \
        == PACKAGES


def test_helpers_import_no_entry_point_nor_harness() -> None:
    top = {f"bench.{name}" for name in _top_modules()}
    for path in sorted((BENCH / "lib").glob("*.py")):
        for name in _imports(path):
            assert name not in top and not name.startswith("bench.ab"), (path.name, name)


def test_no_entry_point_imports_a_harness() -> None:
    for path in sorted(BENCH.glob("*.py")):
        if path.stem == "version_ab":  # the alias of bench.ab.version_ab
            continue
        assert not any(n.startswith("bench.ab") for n in _imports(path)), path.name


def test_every_top_module_is_run_by_make_or_a_doc() -> None:
    pages = [ROOT / "Makefile", *sorted((ROOT / "docs").glob("*.md"))]
    named = "".join(page.read_text() for page in pages)
    for name in _top_modules():
        assert '__name__ == "__main__"' in (BENCH / f"{name}.py").read_text(), name
        assert re.search(rf"\bbench\.{name}\b", named), name


def test_no_result_file_among_the_code() -> None:
    results = [p for p in BENCH.rglob("*") if p.suffix in {".png", ".md"}]
    assert not results, results
