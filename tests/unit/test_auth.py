"""Bearer tokens: what verifies, what does not, and settings the API refuses."""

from __future__ import annotations

import time
import warnings

import jwt
import pytest

from api_stub.auth import AuthConfig, InvalidToken, issue_token, verify_token
from worker.config import Settings
from worker.errors import ConfigurationError

SECRET = "unit-test-secret-0123456789abcdefghij"  # noqa: S105 - a throwaway test key
CONFIG = AuthConfig(SECRET)


def test_a_token_round_trips_to_its_subject() -> None:
    assert verify_token(CONFIG, issue_token(CONFIG, "ada")) == "ada"


def test_audience_is_checked_when_configured() -> None:
    with_aud = AuthConfig(SECRET, audience="memfleet")
    assert verify_token(with_aud, issue_token(with_aud, "ada")) == "ada"
    with pytest.raises(InvalidToken):
        verify_token(with_aud, issue_token(CONFIG, "ada"))  # no aud
    with pytest.raises(InvalidToken):
        verify_token(CONFIG, issue_token(AuthConfig(SECRET, audience="other"), "ada"))


@pytest.mark.parametrize("token", [
    issue_token(CONFIG, "ada", ttl_s=-5),  # expired
    issue_token(AuthConfig("another-secret-that-is-long-enough!!"), "ada"),  # forged
    jwt.encode({"sub": "ada"}, SECRET, algorithm="HS256"),  # no exp
    jwt.encode({"exp": int(time.time()) + 60}, SECRET, algorithm="HS256"),  # no sub
    jwt.encode({"sub": "", "exp": int(time.time()) + 60}, SECRET, algorithm="HS256"),
    jwt.encode({"sub": "ada", "exp": int(time.time()) + 60}, None, algorithm="none"),
    "not.a.jwt",
    "",
])
def test_tokens_that_do_not_verify(token: str) -> None:
    with pytest.raises(InvalidToken):
        verify_token(CONFIG, token)


def test_another_algorithm_is_refused_even_with_the_right_key() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyJWT warns that the key is short for HS512
        token = jwt.encode({"sub": "ada", "exp": int(time.time()) + 60}, SECRET,
                           algorithm="HS512")
    with pytest.raises(InvalidToken):
        verify_token(CONFIG, token)


def test_a_non_string_subject_is_refused() -> None:
    token = jwt.encode({"sub": 42, "exp": int(time.time()) + 60}, SECRET, algorithm="HS256")
    with pytest.raises(InvalidToken):
        verify_token(CONFIG, token)


def test_settings_without_a_usable_secret_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="MEMFLEET_JWT_SECRET"):
        AuthConfig.from_settings(Settings(jwt_secret=None))
    with pytest.raises(ConfigurationError, match="32 bytes"):
        AuthConfig.from_settings(Settings(jwt_secret="short"))  # noqa: S106
    config = AuthConfig.from_settings(Settings(jwt_secret=SECRET, jwt_audience="a"))
    assert config == AuthConfig(SECRET, "a")
