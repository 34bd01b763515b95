"""`memfleet webhook` refuses, in one line and exit 2 before it touches any server, what
cannot work: no secret without --unsigned, both, a short secret, a URL it cannot post to,
a host name the resolver says does not exist, a start it cannot read. A resolver that
does not answer is a warning, not a refusal; the start line says whether it signs."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

from worker.cli.main import main
from worker.errors import ConfigurationError
from worker.fleet import webhook_start
from worker.fleet.webhook import host_name_or_address, webhook_target
from worker.fleet.webhook_start import Replay, receiver_host_warning, replay_of, start_line

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
                                 "http://alice:PASSWORD9@127.0.0.1:99999/PATHTOKEN7f3a",
                                 "http://alice:PASSWORD9@127.0.0.1:0/PATHTOKEN7f3a",
                                 "http://exa mple.com/hook", "http://ho$t/hook",
                                 "http://-bad-/hook", "http://.../hook", "http:notaurl"])
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


@pytest.mark.parametrize("host", [b"receiver.example", b"receiver.example.", b"my_service",
                                  b"localhost", b"127.0.0.1", b"::1", b"xn--x-9fa.com"])
def test_names_and_addresses_are_hosts(host: bytes) -> None:
    assert host_name_or_address(host)


@pytest.mark.parametrize("host", [b"", b"exa%20mple.com", b"ho$t", b"-bad-", b"...",
                                  b"a..b", b"host\\x", b"a" * 64 + b".example"])
def test_other_strings_are_not(host: bytes) -> None:
    assert not host_name_or_address(host)


def resolver(monkeypatch: pytest.MonkeyPatch, answer: Any) -> list[str]:
    """getaddrinfo answering ``answer`` (an exception is raised); the names asked for."""
    asked: list[str] = []

    def getaddrinfo(host: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(host)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    monkeypatch.setattr(webhook_start.socket, "getaddrinfo", getaddrinfo)
    return asked


def test_a_host_the_resolver_says_does_not_exist_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before Redis (closed here) is touched: the line is the host's, not Redis's."""
    monkeypatch.setenv("MEMFLEET_WEBHOOK_SECRET", SECRET)
    asked = resolver(monkeypatch, socket.gaierror(socket.EAI_NONAME, "Name or service not known"))
    line = one_line(capsys, "--url", "https://receivr.example/hook/PATHTOKEN7f3a")
    assert asked == ["receivr.example"]
    assert "receivr.example does not resolve" in line and "PATHTOKEN7f3a" not in line


@pytest.mark.parametrize("code", ["EAI_AGAIN", "EAI_FAIL"])
def test_a_resolver_that_does_not_answer_is_a_warning(
    code: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    resolver(monkeypatch, socket.gaierror(getattr(socket, code), "Temporary failure"))
    warning = receiver_host_warning("https://receiver.example/hook")
    assert warning is not None and warning.startswith("memfleet webhook: ")
    assert "receiver.example did not resolve now" in warning and "retried" in warning


def test_a_resolver_that_hangs_is_a_warning_after_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def hang(*args: Any, **kwargs: Any) -> Any:
        time.sleep(2)
        return []

    monkeypatch.setattr(webhook_start.socket, "getaddrinfo", hang)
    started = time.monotonic()
    warning = receiver_host_warning("https://receiver.example/hook", timeout_s=0.2)
    assert time.monotonic() - started < 1.5
    assert warning is not None and "did not resolve within 0.2 s" in warning


def test_a_host_that_resolves_is_silent_and_a_proxied_one_is_not_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    asked = resolver(monkeypatch, [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", 0))])
    assert receiver_host_warning("https://receiver.example/hook") is None
    assert asked == ["receiver.example"]
    asked = resolver(monkeypatch, socket.gaierror(socket.EAI_NONAME, "no such name"))
    monkeypatch.setenv("https_proxy", "http://proxy.internal:3128")
    assert receiver_host_warning("https://receiver.internal/hook") is None
    assert asked == [], "the proxy resolves the name"
    monkeypatch.setenv("no_proxy", "receiver.internal")
    with pytest.raises(ConfigurationError, match="does not resolve"):
        receiver_host_warning("https://receiver.internal/hook")


@pytest.mark.parametrize("argv", [["--from-event", "abc"], ["--from-event", "1-2-3"],
                                  ["--from-event", "-1"], ["--from-event", str(2**64)],
                                  ["--from-start", "--from-event", "1-0"]])
def test_a_start_that_cannot_be_read_is_refused_before_redis(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMFLEET_WEBHOOK_SECRET", SECRET)
    line = one_line(capsys, "--url", "http://127.0.0.1:9/hook", *argv)
    assert "--from-" in line


def test_a_replay_starts_at_the_event_asked_for() -> None:
    assert replay_of(False, None) is None
    assert replay_of(True, None) == Replay((0, 0), "start")
    assert replay_of(False, "1764158400000") == Replay((1764158400000, 0), "1764158400000")
    # XGROUP reads after the id it is given: the one just before the event.
    assert Replay((5, 3), "5-3").set_id() == "5-2"
    assert Replay((5, 0), "5-0").set_id() == f"4-{2**64 - 1}"
    assert Replay((0, 0), "start").set_id() == "0-0"


def test_the_start_line_says_whether_deliveries_are_signed() -> None:
    url = "https://alice:PASSWORD9@receiver.example/hook/PATHTOKEN7f3a"
    signed = start_line(webhook_target(url, SECRET, unsigned=False), "from now")
    unsigned = start_line(webhook_target(url, None, unsigned=True), "from now")
    assert signed.startswith("memfleet webhook: ") and "\n" not in signed
    assert ", signed (" in signed and "UNSIGNED" in unsigned and "signed (" not in unsigned
    for line in (signed, unsigned):
        assert "https://***@receiver.example/hook/***" in line
        for secret in (SECRET, "PASSWORD9", "PATHTOKEN7f3a", "alice"):
            assert secret not in line
