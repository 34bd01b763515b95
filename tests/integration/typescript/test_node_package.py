"""The TypeScript client as a new user gets it (clients/typescript/README.md, "Install"):
``npm pack`` in a fresh clone of the committed tree (no node_modules, no dist) builds
the tarball and leaves the clone as git has it; the tarball installs into an empty
CommonJS project and an empty ES module project; and the README's examples, as
written but for the API's address (the key comes from the environment, as they
read it), run to their end and exit by themselves against a real memory API and
worker. ioredis loads and a Redis-mode client closes in both.

Slow (npm installs, two compilations): in ``make test-packages`` (CI runs it beside
``make test``), not in ``make test``.
npm's cache is used first (``--prefer-offline``); the registry only for what it lacks."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import pytest

from api_stub.llm_stub import StubServer
from tests.typescript_node import ROOT, node_fleet, readme_examples
from worker.config import Settings

pytestmark = [pytest.mark.slow, pytest.mark.packaging]

README_API_URL = "http://127.0.0.1:8088"
NPM_QUIET = ["--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"]

# Redis mode from each kind of project: ioredis loads, a hand-over is taken, and the
# script ends once the client is closed.
REDIS_CHECK = {
    "esm": 'import { MemfleetRedisClient } from "@memfleet/client";\n'
           "const memory = new MemfleetRedisClient({ redisUrl: process.env.REDIS_URL,\n"
           "  queueName: process.env.QUEUE });\n"
           "try {\n"
           '  const { handoverId } = await memory.handOver({ userId: "pack-esm",'
           ' sessionId: "1",\n'
           '    messages: [{ role: "user", content: "hi" }] });\n'
           "  console.log(handoverId > 0);\n"
           "} finally {\n"
           "  await memory.close();\n"
           "}\n",
    "cjs": 'const { MemfleetRedisClient } = require("@memfleet/client");\n'
           "const memory = new MemfleetRedisClient({ redisUrl: process.env.REDIS_URL,\n"
           "  queueName: process.env.QUEUE });\n"
           'memory.handOver({ userId: "pack-cjs", sessionId: "1",\n'
           '  messages: [{ role: "user", content: "hi" }] })\n'
           "  .then(({ handoverId }) => console.log(handoverId > 0))\n"
           "  .finally(() => memory.close());\n",
}


def run(args: list[str], cwd: Path, timeout_s: float = 120,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(args)} (in {cwd}) exited {done.returncode}\n"
                    f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}", pytrace=False)
    return done


def fresh_clone(into: Path) -> Path:
    """The committed HEAD of this checkout, cloned: what a new user starts from."""
    head = run(["git", "rev-parse", "HEAD"], ROOT).stdout.strip()
    run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(into)], into.parent)
    run(["git", "checkout", "--quiet", "--detach", head], into)
    return into


def project(folder: Path, kind: str, tarball: Path) -> Path:
    """An empty npm project (`npm init -y`; an ES module one says "type": "module")
    with the tarball installed."""
    folder.mkdir()
    run(["npm", "init", "-y"], folder)
    if kind == "esm":
        manifest = json.loads((folder / "package.json").read_text(encoding="utf-8"))
        manifest["type"] = "module"
        (folder / "package.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    run(["npm", "install", *NPM_QUIET, str(tarball)], folder, timeout_s=180)
    return folder


async def test_the_packed_tarball_installs_and_runs_the_readme_examples_esm_and_cjs(
    settings: Settings, stub: StubServer, tmp_path: Path,
) -> None:
    started = time.monotonic()
    clone = fresh_clone(tmp_path / "clone")
    package = clone / "clients" / "typescript"
    assert not (package / "node_modules").exists() and not (package / "dist").exists()
    packed = tmp_path / "packed"
    packed.mkdir()
    await asyncio.to_thread(run, ["npm", "pack", *NPM_QUIET, "--pack-destination",
                                  str(packed)], package, 240)
    (tarball,) = packed.glob("memfleet-client-*.tgz")
    # Nothing left behind that git would see: no Lua copy, no build output outside
    # what .gitignore names.
    assert run(["git", "status", "--porcelain"], clone).stdout == ""
    assert not (package / "lua").exists()
    listing = run(["tar", "tzf", str(tarball)], tmp_path).stdout.split()
    for needed in ("package/dist/index.js", "package/dist/index.d.ts",
                   "package/dist/cjs/index.js", "package/dist/cjs/index.d.ts",
                   "package/dist/cjs/package.json", "package/README.md"):
        assert needed in listing, needed
    assert not [name for name in listing if "/test/" in name or "/examples/" in name]
    packed_at = time.monotonic()

    esm, cjs = await asyncio.gather(
        asyncio.to_thread(project, tmp_path / "esm", "esm", tarball),
        asyncio.to_thread(project, tmp_path / "cjs", "cjs", tarball))
    installed_at = time.monotonic()

    examples = readme_examples()
    async with node_fleet(settings, stub, tmp_path) as env:
        api_url = env["MEMFLEET_TEST_API_URL"]
        node_env = {**env, "MEMFLEET_SERVICE_KEY": env["MEMFLEET_TEST_SERVICE_KEY"],
                    "REDIS_URL": env["MEMFLEET_TEST_REDIS_URL"],
                    "QUEUE": env["MEMFLEET_TEST_QUEUE"]}
        for folder, name in ((esm, "example.mjs"), (cjs, "example.cjs")):
            text = examples[name]
            assert text.count(README_API_URL) == 1, name
            (folder / name).write_text(text.replace(README_API_URL, api_url), encoding="utf-8")
            done = await asyncio.to_thread(run, ["node", name], folder, 90, node_env)
            assert "Lives in Berlin" in done.stdout, (name, done.stdout, done.stderr)
            assert done.stderr == "", (name, done.stderr)
        for folder, kind in ((esm, "esm"), (cjs, "cjs")):
            script = f"redis_check.{'mjs' if kind == 'esm' else 'cjs'}"
            (folder / script).write_text(REDIS_CHECK[kind], encoding="utf-8")
            done = await asyncio.to_thread(run, ["node", script], folder, 30, node_env)
            assert done.stdout.strip() == "true", (kind, done.stdout, done.stderr)
    print(f"npm pack {packed_at - started:.1f} s, two installs "
          f"{installed_at - packed_at:.1f} s, in all {time.monotonic() - started:.1f} s")
