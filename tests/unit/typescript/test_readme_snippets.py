"""The README's and the client's README's TypeScript snippets type-check, as written,
against the built package's declarations (``tsc --noEmit``, the package's own strict
settings): a renamed option or method fails here, not on a reader's machine. The
placeholders a snippet leaves to the reader (KEY, messages, lastMessage) are declared.
The client README's runnable examples (example.mjs, example.cjs) parse as what their
names say and close their client; tests/integration/typescript/test_node_package.py
runs them from the packed tarball."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.typescript_node import PACKAGE, ROOT, readme_examples, require_build

PLACEHOLDERS = """declare const KEY: string;
declare const messages: { role: "user" | "assistant"; content: string }[];
declare const lastMessage: string;
export {};
"""


def ts_blocks(text: str) -> list[str]:
    """Every ```ts block of a Markdown text."""
    blocks, lines = [], None
    for line in text.splitlines():
        if lines is None and line.strip() == "```ts":
            lines = []
        elif lines is not None and line.strip() == "```":
            blocks.append("\n".join(lines))
            lines = None
        elif lines is not None:
            lines.append(line)
    return blocks


@pytest.mark.parametrize("readme", [ROOT / "README.md", PACKAGE / "README.md"],
                         ids=["README.md", "clients/typescript/README.md"])
def test_the_typescript_snippets_type_check(readme: Path) -> None:
    require_build()
    blocks = ts_blocks(readme.read_text(encoding="utf-8"))
    assert blocks, f"{readme.name} has no ```ts block"
    # Inside the package, so that "@memfleet/client" resolves to the package itself
    # (its package.json names it and its exports point at dist/).
    with tempfile.TemporaryDirectory(dir=PACKAGE, prefix=".snippets-") as folder:
        files = []
        for number, block in enumerate(blocks):
            path = Path(folder) / f"snippet_{number}.ts"
            path.write_text(PLACEHOLDERS + block + "\n", encoding="utf-8")
            files.append(path.name)
        config = {"extends": "../tsconfig.json", "compilerOptions": {
            "noEmit": True, "rootDir": "."}, "include": files}
        (Path(folder) / "tsconfig.json").write_text(json.dumps(config), encoding="utf-8")
        done = subprocess.run(
            ["node", str(PACKAGE / "node_modules" / "typescript" / "bin" / "tsc"), "-p",
             folder], cwd=PACKAGE, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_runnable_examples_parse_and_close_their_client(tmp_path: Path) -> None:
    examples = readme_examples()
    assert sorted(examples) == ["example.cjs", "example.mjs"]
    for name, text in examples.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        done = subprocess.run(["node", "--check", str(path)], capture_output=True, text=True,
                              timeout=30, check=False)
        assert done.returncode == 0, f"{name}: {done.stderr}"
        assert "finally {" in text and "await memory.close();" in text, name
    assert 'require("@memfleet/client")' in examples["example.cjs"]
    assert 'from "@memfleet/client"' in examples["example.mjs"]
