"""`memfleet token` (issue 40): a user's token, or their panel link, signed only with a key
given on purpose (MEMFLEET_JWT_SECRET or --secret-file), verified here as the API does;
each mistake one `memfleet: ...` line and exit 2."""

from __future__ import annotations

from pathlib import Path

import jwt
import pytest

from worker.api.auth import AuthConfig, InvalidToken, verify_token
from worker.cli.main import main

KEY = "k" * 40


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMFLEET_JWT_SECRET", "MEMFLEET_JWT_AUDIENCE", "MEMFLEET_JWT_ISSUER"):
        monkeypatch.delenv(name, raising=False)


def test_a_token_from_the_environment_verifies_for_its_user(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("MEMFLEET_JWT_SECRET", KEY)
    monkeypatch.setenv("MEMFLEET_JWT_AUDIENCE", "memory")
    code, out, err = run(["token", "--user", "ada", "--ttl", "120"], capsys)
    assert code == 0 and err == ""
    token = out.strip()
    assert verify_token(AuthConfig(KEY, audience="memory"), token) == "ada"
    claims = jwt.decode(token, KEY, algorithms=["HS256"], audience="memory")
    assert claims["exp"] - claims["iat"] == 120
    with pytest.raises(InvalidToken, match="signature"):
        verify_token(AuthConfig("x" * 40, audience="memory"), token)
    with pytest.raises(InvalidToken, match="audience"):
        verify_token(AuthConfig(KEY), token)


def test_panel_prints_the_link_with_the_token_in_its_fragment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    key_file = tmp_path / "jwt-secret"
    key_file.write_text(KEY + "\n")
    code, out, _ = run(["token", "--user", "ada", "--panel", "--secret-file", str(key_file),
                        "--api-url", "http://memory.example:9000/"], capsys)
    assert code == 0
    link, token = out.strip().split("#token=")
    assert link == "http://memory.example:9000/panel"
    assert verify_token(AuthConfig(KEY), token) == "ada"


@pytest.mark.parametrize(("argv", "env_key", "says"), [
    (["token", "--user", "ada"], None,
     "memfleet: token needs the memory API's key: set MEMFLEET_JWT_SECRET or pass "
     "--secret-file (`memfleet dev` prints its own)"),
    (["token", "--user", "ada", "--secret-file", "/nonexistent/key"], None,
     "memfleet: --secret-file /nonexistent/key: cannot read it (No such file or directory)"),
    (["token", "--user", "ada"], "short",
     "memfleet: MEMFLEET_JWT_SECRET must be at least 32 bytes"),
    (["token", "--user", "ada", "--ttl", "0"], KEY,
     "memfleet: --ttl must be over 0 and at most MEMFLEET_JWT_MAX_LIFETIME_S (86400 s)"),
    (["token", "--user", "ada", "--ttl", "86401"], KEY,
     "memfleet: --ttl must be over 0 and at most MEMFLEET_JWT_MAX_LIFETIME_S (86400 s)"),
    (["token", "--user", "a\x07b"], KEY, "memfleet: --user: id "),
    (["token"], KEY, "memfleet: token: the following arguments are required: --user"),
])
def test_a_token_mistake_is_one_line_and_exit_2(
    argv: list[str], env_key: str | None, says: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if env_key is not None:
        monkeypatch.setenv("MEMFLEET_JWT_SECRET", env_key)
    try:
        code, out, err = run(argv, capsys)
    except SystemExit as exited:  # argparse's own mistakes
        code, (out, err) = int(exited.code or 0), capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(says), err
    assert KEY not in err


def test_the_key_never_leaves_in_a_mistake(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("MEMFLEET_JWT_SECRET", KEY)
    for argv in (["--ttl", "-1"], ["--user", "a\x07b"], ["--secret-file", "/nonexistent"]):
        code, out, err = run(["token", "--user", "ada", *argv], capsys)
        assert code == 2 and out == "" and KEY not in err
