"""The TypeScript client's errors are named and nested as the Python clients' (issue 40):
one `catch` reads the same in both languages. Every error class the TypeScript package
exports has a Python class of its name with the same parent, and every error a Python
chat server imports from worker.client has its TypeScript class."""

from __future__ import annotations

import json
import subprocess

import worker.client
from tests.typescript_node import DIST, require_build
from worker.errors import MemfleetError

TREE_SCRIPT = """
const exported = await import(process.argv[1]);
const tree = {};
for (const [name, value] of Object.entries(exported)) {
  if (typeof value === "function" && (value === exported.MemfleetError
      || value.prototype instanceof exported.MemfleetError)) {
    tree[name] = value === exported.MemfleetError ? null : Object.getPrototypeOf(value).name;
  }
}
console.log(JSON.stringify(tree));
"""


def _typescript_tree() -> dict[str, str | None]:
    require_build()
    done = subprocess.run(["node", "--input-type=module", "-e", TREE_SCRIPT,
                           (DIST / "index.js").as_uri()], capture_output=True, text=True,
                          timeout=60, check=True)
    tree: dict[str, str | None] = json.loads(done.stdout)
    return tree


def _python_parent(cls: type) -> str | None:
    if cls is MemfleetError:
        return None
    # The first base that is a memfleet error (InvalidHandover is a ValueError too).
    return next(b.__name__ for b in cls.__bases__ if issubclass(b, MemfleetError))


def test_every_typescript_error_is_the_python_one_with_the_same_parent() -> None:
    import worker.errors as errors

    typescript = _typescript_tree()
    assert "MemoryApiUnavailable" in typescript and "HandoverUnavailable" in typescript
    python = {name: _python_parent(getattr(errors, name)) for name in typescript
              if isinstance(getattr(errors, name, None), type)}
    assert python == typescript


def test_every_error_python_chat_servers_import_has_its_typescript_class() -> None:
    exported = {name for name in worker.client.__all__
                if isinstance(getattr(worker.client, name), type)
                and issubclass(getattr(worker.client, name), MemfleetError)}
    assert exported, "worker.client exports no error"
    # The webhook's signature check is Python's alone: the TypeScript package sends and
    # reads memory; it has no webhook receiver (docs/handover.md, "Events").
    assert exported - set(_typescript_tree()) == {"SignatureInvalid"}
