"""`memfleet webhook` refuses, in one line and exit 2 before it touches any server, what
cannot work: no secret without --unsigned, both, a short secret, a URL it cannot post to."""

from __future__ import annotations

import socket

import pytest

from worker.cli.main import main
from worker.fleet.webhook import webhook_target

SECRET = "webhook-secret-0123456789"  # noqa: S105 - a throwaway key


@pytest.fixture(autouse=True)
def unreachable_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MEMFLEET_ variable but servers on a closed port: a check that ran after the
    Redis check would fail on Redis, not with its own message. (Every case here fails
    before the CLI configures logging, which would point this process's at capsys.)"""
    import os

    for name in [n for n in os.environ if n.startswith("MEMFLEET_")]:
        monkeypatch.delenv(name)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("MEMFLEET_REDIS_URL", f"redis://127.0.0.1:{port}")
    monkeypatch.setenv("MEMFLEET_DATABASE_URL", f"postgresql://u@127.0.0.1:{port}/db")


def one_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["webhook", *argv]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith("memfleet: "), err
    return lines[0]


def test_no_secret_and_no_unsigned_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line(capsys, "--url", "http://127.0.0.1:9/hook")
    assert "MEMFLEET_WEBHOOK_SECRET" in line and "--unsigned" in line


def test_a_secret_and_unsigned_together_are_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMFLEET_WEBHOOK_SECRET", SECRET)
    line = one_line(capsys, "--url", "http://127.0.0.1:9/hook", "--unsigned")
    assert "choose one" in line and SECRET not in line


def test_a_short_secret_is_refused(capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMFLEET_WEBHOOK_SECRET", "short")
    line = one_line(capsys, "--url", "http://127.0.0.1:9/hook")
    assert "at least 16 characters" in line


@pytest.mark.parametrize("url", ["notaurl", "ftp://127.0.0.1/hook", "http://", "/hook",
                                 "http://alice:PASSWORD9@127.0.0.1:99999/PATHTOKEN7f3a"])
def test_a_url_that_cannot_be_posted_to_fails_at_once(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMFLEET_WEBHOOK_SECRET", SECRET)
    line = one_line(capsys, "--url", url)
    assert "webhook URL" in line and "http://" in line
    for secret in ("PASSWORD9", "PATHTOKEN7f3a", "notaurl"):
        assert secret not in line


def test_the_url_setting_is_checked_too(capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMFLEET_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("MEMFLEET_WEBHOOK_URL", "notaurl")
    assert "webhook URL" in one_line(capsys)


def test_unsigned_by_choice_gives_a_target_without_a_secret() -> None:
    """The pure check itself (the CLI past it would configure this process's logging)."""
    target = webhook_target("https://receiver.example/hook", None, unsigned=True)
    assert target.secret is None
    assert webhook_target("http://127.0.0.1:9/hook", SECRET, unsigned=False).secret == SECRET
