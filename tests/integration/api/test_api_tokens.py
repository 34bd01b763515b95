"""Tokens over real HTTP: docs/api.md's minting code, run as written, is let in; a token
that is refused says why (RFC 6750), and the server logs the reason's class."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import jwt
import pytest

from tests.api_server import SECRET, api_settings, running_api
from worker.api.settings import ApiSettings
from worker.config import Settings

API_DOC = Path(__file__).resolve().parents[3] / "docs" / "api.md"


def minting_snippet() -> str:
    """The first Python block under "### Minting a token" in docs/api.md, as it is."""
    text = API_DOC.read_text("utf-8")
    section = text[text.index("### Minting a token"):]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None, "docs/api.md has no Python block under 'Minting a token'"
    return found.group(1)


def mint(environment: dict[str, str]) -> str:
    """The snippet run as a program of its own, with only these MEMFLEET_JWT_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_JWT_")}
    done = subprocess.run([sys.executable, "-c", minting_snippet()], env={**env, **environment},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


async def facts_with(api: httpx.AsyncClient, token: str) -> httpx.Response:
    return await api.get("/users/ada/facts", headers={"Authorization": f"Bearer {token}"})


async def test_the_documented_minting_code_makes_a_token_the_api_takes(
    api: httpx.AsyncClient,
) -> None:
    token = mint({"MEMFLEET_JWT_SECRET": SECRET})
    resp = await facts_with(api, token)
    assert resp.status_code == 200, resp.text
    claims = jwt.decode(token, SECRET, algorithms=["HS256"])
    assert claims["sub"] == "ada" and set(claims) == {"sub", "iat", "exp"}
    assert claims["exp"] - claims["iat"] <= ApiSettings().jwt_max_lifetime_s


async def test_the_documented_code_carries_audience_and_issuer_when_the_api_sets_them(
    settings: Settings,
) -> None:
    strict = api_settings(settings).model_copy(
        update={"jwt_audience": "memfleet", "jwt_issuer": "chat.example"})
    async with running_api(strict) as base_url, \
            httpx.AsyncClient(base_url=base_url, timeout=30) as api:
        both = mint({"MEMFLEET_JWT_SECRET": SECRET, "MEMFLEET_JWT_AUDIENCE": "memfleet",
                     "MEMFLEET_JWT_ISSUER": "chat.example"})
        assert (await facts_with(api, both)).status_code == 200
        # Without the settings the API has, the code's token says what it lacks.
        plain = await facts_with(api, mint({"MEMFLEET_JWT_SECRET": SECRET}))
        assert plain.status_code == 401
        assert 'error_description="the aud claim is missing"' in \
            plain.headers["www-authenticate"]


async def test_a_refused_token_says_why_and_the_server_logs_the_class(
    api: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    now = int(time.time())
    cases = {
        "expired": jwt.encode({"sub": "ada", "iat": now - 7200, "exp": now - 3600}, SECRET,
                              algorithm="HS256"),
        "missing_claim": jwt.encode({"sub": "ada", "exp": now + 600}, SECRET,
                                    algorithm="HS256"),
        "lifetime_over_cap": jwt.encode({"sub": "ada", "iat": now, "exp": now + 10**6},
                                        SECRET, algorithm="HS256"),
        "bad_signature": mint({"MEMFLEET_JWT_SECRET": "x" * 40}),
    }
    with caplog.at_level(logging.INFO, logger="memfleet.api.auth"):
        for kind, token in cases.items():
            resp = await facts_with(api, token)
            assert resp.status_code == 401, (kind, resp.text)
            challenge = resp.headers["www-authenticate"]
            assert challenge.startswith('Bearer error="invalid_token", error_description="')
            assert resp.json()["detail"].startswith("a valid bearer token is required: ")
            assert token not in challenge and token not in resp.text
        bare = await api.get("/users/ada/facts")
        assert bare.status_code == 401 and bare.headers["www-authenticate"] == "Bearer"
    logged = [r.getMessage() for r in caplog.records if r.name == "memfleet.api.auth"]
    assert [re.sub(r"\).*", ")", line) for line in logged] == [
        f"memory API: 401 invalid_token ({kind})" for kind in cases
    ] + ["memory API: 401: no bearer token"]
    assert not any("ada" in line or any(t in line for t in cases.values())
                   for line in logged)
