"""Bearer tokens: what verifies, what does not, and settings the API refuses."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
import warnings

import jwt
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from worker.api.auth import AuthConfig, InvalidToken, TokenSubject, issue_token, verify_token
from worker.api.settings import ApiSettings
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


# Made when the test runs, not when it is collected: a token with an `exp` a minute
# ahead must still be unexpired then, so that only what the case names is wrong; and the
# ids stay the same in every process (pytest-xdist's workers must collect alike).
UNVERIFIABLE = {
    "expired": lambda: issue_token(CONFIG, "ada", ttl_s=-60),  # beyond the leeway
    "forged": lambda: issue_token(AuthConfig("another-secret-that-is-long-enough!!"), "ada"),
    "no-exp": lambda: jwt.encode({"sub": "ada"}, SECRET, algorithm="HS256"),
    "no-sub": lambda: jwt.encode({"exp": int(time.time()) + 60}, SECRET, algorithm="HS256"),
    "empty-sub": lambda: jwt.encode({"sub": "", "exp": int(time.time()) + 60}, SECRET,
                                    algorithm="HS256"),
    "alg-none": lambda: jwt.encode({"sub": "ada", "exp": int(time.time()) + 60}, None,
                                   algorithm="none"),
    "not-a-jwt": lambda: "not.a.jwt",
    "empty": lambda: "",
}


@pytest.mark.parametrize("case", UNVERIFIABLE)
def test_tokens_that_do_not_verify(case: str) -> None:
    token = UNVERIFIABLE[case]()
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
        AuthConfig.from_settings(ApiSettings(jwt_secret=None))
    with pytest.raises(ConfigurationError, match="32 bytes"):
        AuthConfig.from_settings(ApiSettings(jwt_secret="short"))  # noqa: S106
    config = AuthConfig.from_settings(ApiSettings(jwt_secret=SECRET, jwt_audience="a"))
    assert (config.secret, config.audience, config.issuer) == (SECRET, "a", None)


def _signed(claims: dict[str, object], secret: str = SECRET) -> str:
    """Signed as is: PyJWT's encoder refuses some of the bad claims a signer may send."""
    def part(value: object) -> bytes:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=")

    signing_input = part({"alg": "HS256", "typ": "JWT"}) + b"." + part(claims)
    signature = hmac.new(secret.encode(), signing_input, hashlib.sha256).digest()
    return (signing_input + b"." + base64.urlsafe_b64encode(signature).rstrip(b"=")).decode()


NOW = 1_900_000_000


@pytest.mark.parametrize(("claims", "reason"), [
    ({"sub": "ada", "iat": NOW, "exp": str(NOW + 600)}, "the exp claim is not a number"),
    ({"sub": "ada", "iat": str(NOW), "exp": NOW + 600}, "the iat claim is not a number"),
    ({"sub": "ada", "iat": NOW, "exp": True}, "the exp claim is not a number"),
    ({"sub": "ada", "iat": NOW, "exp": [NOW + 600]}, "the exp claim is not a number"),
    ({"sub": "ada", "iat": NOW, "exp": float("inf")}, "the exp claim is not a number"),
    ({"sub": "ada", "iat": NOW, "exp": NOW + 600, "nbf": "now"},
     "the nbf claim is not a number"),
    ({"sub": "ada", "iat": NOW}, "the exp claim is missing"),
    ({"sub": "ada", "exp": NOW + 600}, "the iat claim is missing"),
    ({"iat": NOW, "exp": NOW + 600}, "the sub claim is missing"),
    ({"sub": ["ada"], "iat": NOW, "exp": NOW + 600}, "the sub claim is no valid user id"),
    ({"sub": "ada", "iat": NOW, "exp": NOW + 600, "aud": "elsewhere"},
     "the token names an audience and none is expected"),
])
def test_a_malformed_claim_is_refused_with_its_reason(
    claims: dict[str, object], reason: str
) -> None:
    """A validly signed token with a claim of the wrong type is InvalidToken (a 401),
    never a TypeError (a 500): a string exp used to reach arithmetic."""
    with pytest.raises(InvalidToken, match=reason) as caught:
        verify_token(CONFIG, _signed(claims), now=NOW)
    assert "ada" not in str(caught.value) and str(NOW) not in str(caught.value)


def test_the_clock_leeway_forgives_a_signer_a_little_ahead_or_behind() -> None:
    config = AuthConfig(SECRET, leeway_s=30)
    ahead = issue_token(config, "ada", ttl_s=600, now=NOW + 1)  # the chat server 1 s ahead
    assert verify_token(config, ahead, now=NOW) == "ada"
    just_expired = issue_token(config, "ada", ttl_s=60, now=NOW - 80)  # 20 s ago
    assert verify_token(config, just_expired, now=NOW) == "ada"
    with pytest.raises(InvalidToken, match="expired"):
        verify_token(config, issue_token(config, "ada", ttl_s=60, now=NOW - 100), now=NOW)
    with pytest.raises(InvalidToken, match="issued in the future"):
        verify_token(config, issue_token(config, "ada", now=NOW + 31), now=NOW)
    not_yet = _signed({"sub": "ada", "iat": NOW, "exp": NOW + 600, "nbf": NOW + 60})
    with pytest.raises(InvalidToken, match="not valid yet"):
        verify_token(config, not_yet, now=NOW)
    strict = AuthConfig(SECRET, leeway_s=0)
    with pytest.raises(InvalidToken, match="issued in the future"):
        verify_token(strict, ahead, now=NOW)


def test_issuer_and_audience_are_required_when_configured() -> None:
    config = AuthConfig(SECRET, audience="memfleet", issuer="chat.example")
    assert verify_token(config, issue_token(config, "ada", now=NOW), now=NOW) == "ada"
    base = {"sub": "ada", "iat": NOW, "exp": NOW + 600}
    for claims, reason in [
        ({**base, "aud": "memfleet"}, "the iss claim is missing"),
        ({**base, "iss": "chat.example"}, "the aud claim is missing"),
        ({**base, "aud": "memfleet", "iss": "evil.example"}, "another issuer"),
        ({**base, "aud": "memfleet", "iss": 7}, "the iss claim is not a string"),
        ({**base, "aud": 7, "iss": "chat.example"}, "the aud claim is not a string"),
        ({**base, "aud": ["other"], "iss": "chat.example"}, "another audience"),
    ]:
        with pytest.raises(InvalidToken, match=reason):
            verify_token(config, _signed(claims), now=NOW)
    listed = _signed({**base, "aud": ["other", "memfleet"], "iss": "chat.example"})
    assert verify_token(config, listed, now=NOW) == "ada"


def test_settings_carry_issuer_and_leeway() -> None:
    config = AuthConfig.from_settings(ApiSettings(jwt_secret=SECRET, jwt_issuer="chat",
                                                  jwt_leeway_s=5))
    assert (config.issuer, config.leeway_s) == ("chat", 5)


# -- the 401 a client gets, and the line the server logs, per reason class ----------

def _app(config: AuthConfig) -> FastAPI:
    """The dependency the API's routes take, on an app with nothing else."""
    app = FastAPI()
    app.state.auth = config

    @app.get("/whoami")
    async def whoami(subject: TokenSubject) -> dict[str, str]:
        return {"sub": subject}

    return app


LIVE = int(time.time())
AUD_CONFIG = AuthConfig(SECRET, audience="memfleet")
_OK = {"sub": "ada", "iat": LIVE, "exp": LIVE + 600, "aud": "memfleet"}


@pytest.mark.parametrize(("token", "kind", "description"), [
    (_signed({"sub": "ada", "exp": LIVE + 600, "aud": "memfleet"}), "missing_claim",
     "the iat claim is missing"),
    (_signed({"sub": "ada", "iat": LIVE, "aud": "memfleet"}), "missing_claim",
     "the exp claim is missing"),
    (_signed({"sub": "ada", "iat": LIVE, "exp": LIVE + 600}), "missing_claim",
     "the aud claim is missing"),
    (_signed({**_OK, "exp": LIVE + 86_401}), "lifetime_over_cap",
     "the token's lifetime (exp - iat) is over the cap, MEMFLEET_JWT_MAX_LIFETIME_S"),
    (_signed({**_OK, "iat": LIVE - 7200, "exp": LIVE - 3600}), "expired",
     "the token has expired"),
    (_signed(_OK, "another-secret-that-is-long-enough!!"), "bad_signature",
     "the signature does not verify with the API's key (MEMFLEET_JWT_SECRET)"),
    (_signed({**_OK, "aud": "elsewhere"}), "wrong_audience",
     "the token is for another audience"),
    ("not-a-jwt", "malformed", "the token is not a well-formed JWT"),
    (_signed({**_OK, "exp": str(LIVE + 600)}), "bad_claim",
     "the exp claim is not a number of seconds"),
])
def test_each_reason_is_a_401_that_names_it_and_the_server_logs_its_class(
    token: str, kind: str, description: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="memfleet.api.auth"), \
            TestClient(_app(AUD_CONFIG)) as client:
        resp = client.get("/whoami", headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 401
    assert resp.headers["www-authenticate"] == (
        f'Bearer error="invalid_token", error_description="{description}"')
    assert resp.json() == {"detail": f"a valid bearer token is required: {description}"}
    lines = [r.getMessage() for r in caplog.records if r.name == "memfleet.api.auth"]
    assert lines == [f"memory API: 401 invalid_token ({kind}): {description}"]
    # Neither the token nor a claim's value goes back or into the log.
    for said in (resp.text, resp.headers["www-authenticate"], *lines):
        assert token not in said and "ada" not in said and str(LIVE) not in said
        assert "elsewhere" not in said
    # RFC 6750 section 3: error_description is printable ASCII without " or \.
    assert all(0x20 <= ord(c) <= 0x7E and c not in '"\\' for c in description)


def test_a_valid_token_passes_and_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="memfleet.api.auth"), \
            TestClient(_app(AUD_CONFIG)) as client:
        # Signed now, not at collection: the unit tests run last in a 12-minute `make
        # test`, past _OK's ten minutes.
        now = int(time.time())
        fresh = {**_OK, "iat": now, "exp": now + 600}
        resp = client.get("/whoami", headers={"Authorization": f"Bearer {_signed(fresh)}"})
    assert resp.status_code == 200 and resp.json() == {"sub": "ada"}
    assert not [r for r in caplog.records if r.name == "memfleet.api.auth"]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Basic YWRhOnB3"}])
def test_no_bearer_token_is_the_rfcs_bare_challenge(
    headers: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """RFC 6750 section 3.1: a request without authentication gets no error code."""
    with caplog.at_level(logging.INFO, logger="memfleet.api.auth"), \
            TestClient(_app(AUD_CONFIG)) as client:
        resp = client.get("/whoami", headers=headers)
    assert resp.status_code == 401
    assert resp.headers["www-authenticate"] == "Bearer"
    assert resp.json() == {"detail": "a valid bearer token is required"}
    assert [r.getMessage() for r in caplog.records if r.name == "memfleet.api.auth"] == [
        "memory API: 401: no bearer token"]


@pytest.mark.parametrize(("claims", "kind"), [
    ({"iat": NOW + 60}, "not_yet_valid"),
    ({"nbf": NOW + 60}, "not_yet_valid"),
    ({"iss": None}, "missing_claim"),
    ({"iss": "elsewhere"}, "wrong_issuer"),
    ({"sub": ""}, "bad_claim"),
    ({"alg": "none"}, "malformed"),
])
def test_every_refusal_has_a_class(claims: dict[str, object], kind: str) -> None:
    config = AuthConfig(SECRET, audience="memfleet", issuer="chat", leeway_s=0)
    valid = {"sub": "ada", "iat": NOW, "exp": NOW + 600, "aud": "memfleet", "iss": "chat"}
    assert verify_token(config, _signed(valid), now=NOW) == "ada"
    if claims == {"alg": "none"}:
        token = jwt.encode(valid, None, algorithm="none")
    else:
        token = _signed({k: v for k, v in {**valid, **claims}.items() if v is not None})
    with pytest.raises(InvalidToken) as caught:
        verify_token(config, token, now=NOW)
    assert caught.value.kind == kind
