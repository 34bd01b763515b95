"""The Python package as a user installs it (issue 40): `pip wheel .` builds it, and it
installs into a clean virtual environment (no checkout on its path) where the CLI runs,
the schema ships (migrate finds it), the memory API's pieces load and the chat server's
clients import. Dependencies come from the lock file (requirements/api.txt), checked
against their hashes, as deploy/compose/api.Dockerfile installs them; pip's cache makes
that quick after `make venv`. About a minute: in `make test-packages` (CI runs it beside
`make test`), not in `make test`."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from worker.config import Settings

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[2]


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-3000:])
    return done


def test_the_wheel_builds_and_runs_from_a_clean_venv(settings: Settings, tmp_path: Path) -> None:
    # With the locked setuptools already in this venv (as `make venv` installs memfleet).
    run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
         "--quiet", "--wheel-dir", str(tmp_path / "dist")], cwd=tmp_path)
    [wheel] = (tmp_path / "dist").glob("memfleet-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"memfleet_schema/baseline.sql", "worker/protocol/lua/enqueue.lua",
            "worker/api/panel/index.html", "worker/py.typed",
            "worker/client/memory_tools.json"} <= names

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "install",
           "--quiet", "--no-compile"]
    run([*pip, "--require-hashes", "-r", str(ROOT / "requirements" / "api.txt")], cwd=tmp_path,
        timeout=600)
    run([*pip, "--no-deps", str(wheel)], cwd=tmp_path)
    run([str(venv / "bin" / "python"), "-m", "pip", "check"], cwd=tmp_path)

    # Outside the checkout, with nothing of it on the path: only the install answers.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MEMFLEET_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(MEMFLEET_DATABASE_URL=settings.database_url or "",
               MEMFLEET_REDIS_URL=settings.redis_url or "", PATH=f"{venv / 'bin'}:/usr/bin:/bin")
    python = str(venv / "bin" / "python")
    where = run([python, "-c", "import worker, memfleet_schema; print(worker.__file__)"],
                cwd=tmp_path, env=env).stdout
    assert str(venv) in where and str(ROOT) not in where
    assert "dev" in run(["memfleet", "--help"], cwd=tmp_path, env=env).stdout
    migrated = run(["memfleet", "migrate"], cwd=tmp_path, env=env).stdout
    assert migrated.startswith(("applied: ", "schema is up to date")), migrated
    minted = run(["memfleet", "token", "--user", "ada"], cwd=tmp_path,
                 env={**env, "MEMFLEET_JWT_SECRET": "s" * 32}).stdout
    assert minted.count(".") == 2
    clients = ("import worker.api.app; from worker.client import AsyncMemoryApi, MemoryApi; "
               "from worker.client.memory_tools import memory_tool_definitions; "
               "print(len(memory_tool_definitions()))")
    assert run([python, "-c", clients], cwd=tmp_path, env=env).stdout.strip() == "4"
