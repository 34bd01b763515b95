"""Settings by process (issue 39): the fleet's (worker.config.Settings) are read by every
process; the memory API's own (worker.api.settings.ApiSettings) by the API alone. The
variables keep their names, and one environment serves every process: each ignores
the other's variables, even a bad value of one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from worker.api.app import create_app
from worker.api.settings import ApiSettings
from worker.cli.main import build_parser
from worker.config import Settings, settings_error

ROOT = Path(__file__).resolve().parents[3]
API_PREFIXES = ("jwt_", "api_", "chat_", "panel_")
API_OWN = set(ApiSettings.model_fields) - set(Settings.model_fields)
SERVERS = {"database_url": "postgresql://unused", "redis_url": "redis://unused"}


@pytest.fixture(autouse=True)
def _no_memfleet_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.upper().startswith("MEMFLEET_")]:
        monkeypatch.delenv(name)


def test_the_fleets_settings_have_none_of_the_apis() -> None:
    shared = [name for name in Settings.model_fields if name.startswith(API_PREFIXES)]
    assert shared == []


def test_the_apis_own_settings_are_the_jwt_api_chat_and_panel_ones() -> None:
    assert ApiSettings.model_fields.keys() >= Settings.model_fields.keys()
    assert all(name.startswith(API_PREFIXES) for name in API_OWN), sorted(API_OWN)
    assert {"jwt_secret", "jwt_audience", "jwt_issuer", "jwt_max_lifetime_s", "jwt_leeway_s",
            "api_max_body_bytes", "api_docs", "api_send_timeout_s", "api_waits_max",
            "chat_standin", "chat_answer_ms", "panel_frame_ancestors"} <= API_OWN
    # Read by `memfleet eval` too: the fleet's.
    assert "read_top_k" in Settings.model_fields


def test_the_variables_keep_their_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMFLEET_JWT_SECRET", "s" * 32)
    monkeypatch.setenv("MEMFLEET_API_MAX_BODY_BYTES", "4096")
    monkeypatch.setenv("MEMFLEET_CHAT_TTL_S", "60")
    monkeypatch.setenv("MEMFLEET_PANEL_FRAME_ANCESTORS", "https://chat.example.com")
    monkeypatch.setenv("MEMFLEET_MAX_JOBS", "3")
    api = ApiSettings()
    assert api.jwt_secret == SecretStr("s" * 32) and api.api_max_body_bytes == 4096
    assert api.chat_ttl_s == 60 and api.panel_frame_ancestors == "https://chat.example.com"
    assert api.max_jobs == 3  # the fleet's settings, read by the API too


def test_a_worker_ignores_the_apis_variables_even_bad_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One environment (a compose file, a .env) for every process.
    monkeypatch.setenv("MEMFLEET_JWT_SECRET", "short")
    monkeypatch.setenv("MEMFLEET_PANEL_FRAME_ANCESTORS", "https:")
    monkeypatch.setenv("MEMFLEET_API_MAX_BODY_BYTES", "-1")
    monkeypatch.setenv("MEMFLEET_CHAT_STANDIN", "yes")
    settings = Settings()
    assert not any(hasattr(settings, name) for name in API_OWN)
    with pytest.raises(ValidationError) as caught:
        ApiSettings()  # the API itself refuses them
    line = settings_error(caught.value)
    assert "MEMFLEET_PANEL_FRAME_ANCESTORS" in line and "MEMFLEET_API_MAX_BODY_BYTES" in line


def test_the_api_checks_the_fleets_settings_too() -> None:
    with pytest.raises(ValidationError, match="redis_url"):
        ApiSettings(redis_url="http://cache:6379")


def test_the_app_factory_requires_the_apis_settings() -> None:
    with pytest.raises(TypeError, match="ApiSettings"):
        create_app(Settings(**SERVERS))  # type: ignore[arg-type]
    app = create_app(ApiSettings(jwt_secret=SecretStr("x" * 32), **SERVERS))
    assert app.title


def test_memfleet_api_reads_the_apis_settings_and_other_commands_the_fleets() -> None:
    parser = build_parser()
    assert type(parser.parse_args(["api"]).read_settings()) is ApiSettings
    for command in (["worker"], ["exporter"], ["webhook"], ["keys", "list"], ["eval"]):
        assert getattr(parser.parse_args(command), "read_settings", Settings) is Settings


def test_the_apis_settings_import_without_the_api_extra() -> None:
    # `memfleet api` reads them before it finds out whether FastAPI is installed.
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, worker.cli.main, worker.api.settings; "
                               "print(*sorted(sys.modules))"],
        capture_output=True, text=True, check=True, cwd=ROOT, timeout=60,
    ).stdout.split()
    assert not [m for m in loaded if m.split(".")[0] in ("fastapi", "starlette", "uvicorn")]
