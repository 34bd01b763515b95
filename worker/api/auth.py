"""Bearer tokens: HS256 JWTs whose subject is the user they speak for.

The chat server signs a short-lived token for its logged-in user with
MEMFLEET_JWT_SECRET; every memory endpoint checks it and that its subject is
the user in the path (docs/api.md says how to mint one). 401: no token, or one
that does not verify: bad signature or algorithm, a required claim missing or
of the wrong type (``exp``, ``iat``, ``sub``; ``aud`` and ``iss`` when
configured), expired or not yet valid beyond MEMFLEET_JWT_LEEWAY_S, living
longer than MEMFLEET_JWT_MAX_LIFETIME_S. The reason goes back in the
challenge's ``error_description`` and the JSON detail, and into the log with its
class (``memfleet.api.auth``, INFO): fixed words, never the token nor a claim's
value. 403: a valid token of another user. Neither says anything about the
other user's facts. Service keys (``mfk_...``) and which routes take them:
worker.api.service_auth.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import jwt
from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from worker.api.fields import MAX_ID_CHARS
from worker.api.settings import ApiSettings
from worker.errors import ConfigurationError
from worker.memory_rules import id_fault
from worker.store.service_keys import looks_like_key

if TYPE_CHECKING:
    from jwt.types import Options

ALGORITHM = "HS256"
# RFC 7518 section 3.2: an HS256 key is at least as long as the hash (32 bytes).
MIN_SECRET_BYTES = 32
DEFAULT_LEEWAY_S = 30.0

log = logging.getLogger("memfleet.api.auth")

# One scheme for both credentials (worker.api.service_auth takes it too).
bearer_scheme = HTTPBearer(auto_error=False, description=(
    "An end user's HS256 JWT (`sub` is the user id), or a chat server's service key "
    "`mfk_...` (docs/api.md, Service keys)."))

# PyJWT checks the signature and the header only (its own claim checks are off:
# it takes "123" for a number and lets a string `exp` through to arithmetic).
_SIGNATURE_ONLY: Options = {
    "verify_signature": True, "verify_exp": False, "verify_nbf": False, "verify_iat": False,
    "verify_aud": False, "verify_iss": False, "verify_sub": False, "verify_jti": False,
    "require": [],
}


@dataclass(frozen=True, slots=True)
class AuthConfig:
    secret: str
    audience: str | None = None
    # Tokens living longer (exp - iat) are refused: a leaked token must expire.
    max_lifetime_s: float = 86_400
    issuer: str | None = None
    leeway_s: float = DEFAULT_LEEWAY_S

    @classmethod
    def from_settings(cls, settings: ApiSettings) -> AuthConfig:
        secret = settings.jwt_secret.get_secret_value() if settings.jwt_secret else None
        if not secret:
            raise ConfigurationError("the memory API needs MEMFLEET_JWT_SECRET (an HS256 key)")
        if len(secret.encode()) < MIN_SECRET_BYTES:
            raise ConfigurationError(
                f"MEMFLEET_JWT_SECRET must be at least {MIN_SECRET_BYTES} bytes"
            )
        return cls(secret, settings.jwt_audience, settings.jwt_max_lifetime_s,
                   issuer=settings.jwt_issuer, leeway_s=settings.jwt_leeway_s)


# The classes of InvalidToken (its ``kind``), for the log: one word each to count by.
MALFORMED = "malformed"
BAD_SIGNATURE = "bad_signature"
MISSING_CLAIM = "missing_claim"
BAD_CLAIM = "bad_claim"  # a claim of the wrong type or shape
WRONG_AUDIENCE = "wrong_audience"
WRONG_ISSUER = "wrong_issuer"
EXPIRED = "expired"
NOT_YET_VALID = "not_yet_valid"  # iat or nbf after now + leeway
LIFETIME_OVER_CAP = "lifetime_over_cap"


class InvalidToken(Exception):
    """The token does not verify. The message is the reason in fixed words (safe to send
    back and to log): never the token, never a claim's value; ``kind`` its class."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind


def _missing(name: str) -> InvalidToken:
    return InvalidToken(MISSING_CLAIM, f"the {name} claim is missing")


def issue_token(
    config: AuthConfig, user_id: str, *, ttl_s: float = 900, now: float | None = None
) -> str:
    """A token for ``user_id`` (what a chat server does for its logged-in user)."""
    issued = int(now if now is not None else time.time())
    claims: dict[str, object] = {"sub": user_id, "iat": issued, "exp": issued + int(ttl_s)}
    if config.audience is not None:
        claims["aud"] = config.audience
    if config.issuer is not None:
        claims["iss"] = config.issuer
    return jwt.encode(claims, config.secret, algorithm=ALGORITHM)


def _signed_claims(config: AuthConfig, token: str) -> dict[str, Any]:
    try:
        claims: dict[str, Any] = jwt.decode(
            token, config.secret,
            algorithms=[ALGORITHM],  # never taken from the token: no "none", no key confusion
            options=_SIGNATURE_ONLY,
        )
    except jwt.InvalidSignatureError:
        raise InvalidToken(BAD_SIGNATURE, "the signature does not verify with the API's key"
                           " (MEMFLEET_JWT_SECRET)") from None
    except jwt.InvalidAlgorithmError:
        raise InvalidToken(MALFORMED, f"the algorithm is not {ALGORITHM}") from None
    except jwt.PyJWTError:
        raise InvalidToken(MALFORMED, "the token is not a well-formed JWT") from None
    return claims


def _numeric_date(claims: dict[str, Any], name: str) -> float:
    """A NumericDate claim (RFC 7519: a JSON number of seconds); a string, a boolean,
    an infinity or NaN is no date."""
    value = claims.get(name)
    if value is None:
        raise _missing(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(value):
        raise InvalidToken(BAD_CLAIM, f"the {name} claim is not a number of seconds")
    return float(value)


def _check_audience(config: AuthConfig, claims: dict[str, Any]) -> None:
    aud = claims.get("aud")
    if config.audience is None:
        if aud is not None:  # a token meant for some other service
            raise InvalidToken(WRONG_AUDIENCE,
                               "the token names an audience and none is expected")
        return
    if aud is None:
        raise _missing("aud")
    audiences = [aud] if isinstance(aud, str) else aud
    if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
        raise InvalidToken(BAD_CLAIM, "the aud claim is not a string or a list of strings")
    if config.audience not in audiences:
        raise InvalidToken(WRONG_AUDIENCE, "the token is for another audience")


def _check_issuer(config: AuthConfig, claims: dict[str, Any]) -> None:
    if config.issuer is None:
        return
    iss = claims.get("iss")
    if iss is None:
        raise _missing("iss")
    if not isinstance(iss, str):
        raise InvalidToken(BAD_CLAIM, "the iss claim is not a string")
    if iss != config.issuer:
        raise InvalidToken(WRONG_ISSUER, "the token is from another issuer")


def verify_token(config: AuthConfig, token: str, *, now: float | None = None) -> str:
    """The token's subject; InvalidToken (with its reason) when it does not verify."""
    claims = _signed_claims(config, token)
    expires = _numeric_date(claims, "exp")
    issued = _numeric_date(claims, "iat")
    not_before = _numeric_date(claims, "nbf") if "nbf" in claims else None
    subject = claims.get("sub")
    if subject is None:
        raise _missing("sub")
    if not isinstance(subject, str) or id_fault(subject, MAX_ID_CHARS) is not None:
        raise InvalidToken(BAD_CLAIM, "the sub claim is no valid user id")
    _check_audience(config, claims)
    _check_issuer(config, claims)
    at = time.time() if now is None else now
    if expires <= at - config.leeway_s:
        raise InvalidToken(EXPIRED, "the token has expired")
    if issued > at + config.leeway_s:
        raise InvalidToken(NOT_YET_VALID, "the token is issued in the future")
    if not_before is not None and not_before > at + config.leeway_s:
        raise InvalidToken(NOT_YET_VALID, "the token is not valid yet")
    if expires - issued > config.max_lifetime_s:
        raise InvalidToken(LIFETIME_OVER_CAP, "the token's lifetime (exp - iat) is over the"
                           " cap, MEMFLEET_JWT_MAX_LIFETIME_S")
    return subject


def unauthorized(reason: str | None) -> HTTPException:
    # RFC 6750 section 3: error_description is printable ASCII without quotes or
    # backslashes, which the fixed reasons of InvalidToken are.
    if reason is None:
        return HTTPException(status.HTTP_401_UNAUTHORIZED,
                             detail="a valid bearer token is required",
                             headers={"WWW-Authenticate": "Bearer"})
    return HTTPException(
        status.HTTP_401_UNAUTHORIZED,
        detail=f"a valid bearer token is required: {reason}",
        headers={"WWW-Authenticate":
                 f'Bearer error="invalid_token", error_description="{reason}"'},
    )


async def token_subject(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
) -> str:
    """The verified subject of the request's end-user token, or 401 (403: a service key)."""
    if credentials is None:
        log.info("memory API: 401: no bearer token")
        raise unauthorized(None)
    if looks_like_key(credentials.credentials):
        # A route of one end user's own (the chat stand-in): a server acts through
        # the memory routes, where its scopes say what it may do.
        log.info("memory API: 403: a service key on an end-user route")
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            detail="this route takes an end user's token, not a service key")
    config: AuthConfig = request.app.state.auth
    try:
        return verify_token(config, credentials.credentials)
    except InvalidToken as exc:
        # The class and the fixed words; the access log's line names the route.
        log.info("memory API: 401 invalid_token (%s): %s", exc.kind, exc)
        raise unauthorized(str(exc)) from None


TokenSubject = Annotated[str, Depends(token_subject)]
