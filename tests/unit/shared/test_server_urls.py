"""Server URLs: a scheme their driver cannot use is a settings error naming the variable
(never the value); a server that cannot be reached is named by host and port alone."""

from __future__ import annotations

import socket

import pytest
from pydantic import ValidationError

from worker.config import Settings, settings_error
from worker.server_address import address, network_reason, unreachable


@pytest.mark.parametrize(("field", "url", "says"), [
    ("redis_url", "http://u:hunter2@cache:6379", "MEMFLEET_REDIS_URL: must start with redis://,"
                                                 " rediss:// or unix:// (got http://)"),
    ("database_url", "mysql://u:hunter2@db/app", "MEMFLEET_DATABASE_URL: must start with "
                                                 "postgresql:// or postgres:// (got mysql://)"),
    ("database_url", "u:hunter2@db:5432/app", "(got no scheme)"),
    ("redis_url", "localhost:6379", "(got no scheme)"),
])
def test_a_server_url_of_another_scheme_is_refused(field: str, url: str, says: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(**{field: url})
    line = settings_error(caught.value)
    assert says in line
    assert "hunter2" not in line and "cache" not in line and "db" not in line.split(":", 1)[1]


@pytest.mark.parametrize(("field", "url"), [
    ("database_url", "postgresql://u:p@db:5432/app"), ("database_url", "postgres://db/app"),
    ("database_url", "POSTGRESQL://db/app"), ("redis_url", "redis://cache:6379/0"),
    ("redis_url", "rediss://cache"), ("redis_url", "unix:///run/redis.sock"),
])
def test_the_drivers_schemes_are_taken(field: str, url: str) -> None:
    assert getattr(Settings(**{field: url}), field) == url


def test_an_empty_url_is_unset() -> None:
    settings = Settings(database_url="", redis_url="")
    assert (settings.database_url, settings.redis_url) == (None, None)


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://admin:hunter2@db.internal:6432/app?sslmode=require", "db.internal:6432"),
    ("redis://:hunter2@cache", "cache"),
    ("redis://[::1]:6380/0", "[::1]:6380"),
    ("unix:///run/redis.sock?password=hunter2", "/run/redis.sock"),
    ("postgresql://db:notaport/app", "(an unreadable URL)"),
    (None, "(no URL)"),
])
def test_a_server_is_named_without_its_credentials(url: str | None, shown: str) -> None:
    assert address(url) == shown


def _raised_from(cause: OSError) -> BaseException:
    """An error raised while handling ``cause``, as redis-py wraps the network's."""
    try:
        try:
            raise cause
        except OSError:
            raise RuntimeError("Error connecting")  # noqa: B904 - the context, as redis-py leaves it
    except RuntimeError as wrapped:
        return wrapped


@pytest.mark.parametrize(("cause", "reason"), [
    (ConnectionRefusedError(111, "Connect call failed"), "connection refused"),
    (socket.gaierror(-2, "Name or service not known"), "no such host"),
    (TimeoutError(), "no answer in time"),
    (OSError(113, "No route to host"), "no route to host"),
])
def test_the_network_reason_is_read_through_the_drivers_wrapping(
    cause: OSError, reason: str,
) -> None:
    assert (network_reason(_raised_from(cause)) or "").startswith(reason)
    assert (network_reason(cause) or "").startswith(reason)


def test_an_error_that_is_not_the_network_has_no_network_reason() -> None:
    assert network_reason(ValueError("unknown type: public.vector")) is None


def test_unreachable_names_the_server_and_the_setting() -> None:
    line = unreachable("Redis", "MEMFLEET_REDIS_URL", "redis://:pw@cache:6379", "no such host")
    assert line == ("Redis at cache:6379 is unreachable (no such host): check "
                    "MEMFLEET_REDIS_URL")
