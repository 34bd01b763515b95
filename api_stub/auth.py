"""Bearer tokens: HS256 JWTs whose subject is the user they speak for.

The chat server signs a short-lived token for its logged-in user with
MEMFLEET_JWT_SECRET; every memory endpoint checks it and that its subject is
the user in the path. 401: no token, or one that does not verify (bad
signature, expired, no exp or sub, wrong audience). 403: a valid token of
another user. Neither says anything about the other user's facts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated

import jwt
from fastapi import Depends, HTTPException, Path, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AfterValidator

from api_stub.fields import MAX_ID_CHARS, valid_id
from worker.config import Settings
from worker.contract import id_fault
from worker.errors import ConfigurationError

ALGORITHM = "HS256"
# RFC 7518 section 3.2: an HS256 key is at least as long as the hash (32 bytes).
MIN_SECRET_BYTES = 32

_bearer = HTTPBearer(auto_error=False, description="HS256 JWT; `sub` is the user id.")


@dataclass(frozen=True, slots=True)
class AuthConfig:
    secret: str
    audience: str | None = None
    # Tokens living longer (exp - iat) are refused: a leaked token must expire.
    max_lifetime_s: float = 86_400

    @classmethod
    def from_settings(cls, settings: Settings) -> AuthConfig:
        secret = settings.jwt_secret.get_secret_value() if settings.jwt_secret else None
        if not secret:
            raise ConfigurationError("the memory API needs MEMFLEET_JWT_SECRET (an HS256 key)")
        if len(secret.encode()) < MIN_SECRET_BYTES:
            raise ConfigurationError(
                f"MEMFLEET_JWT_SECRET must be at least {MIN_SECRET_BYTES} bytes"
            )
        return cls(secret, settings.jwt_audience, settings.jwt_max_lifetime_s)


class InvalidToken(Exception):
    """The token does not verify; the reason is for logs, never for the response."""


def issue_token(
    config: AuthConfig, user_id: str, *, ttl_s: float = 900, now: float | None = None
) -> str:
    """A token for ``user_id`` (what a chat server does for its logged-in user)."""
    issued = int(now if now is not None else time.time())
    claims: dict[str, object] = {"sub": user_id, "iat": issued, "exp": issued + int(ttl_s)}
    if config.audience is not None:
        claims["aud"] = config.audience
    return jwt.encode(claims, config.secret, algorithm=ALGORITHM)


def verify_token(config: AuthConfig, token: str) -> str:
    """The token's subject; InvalidToken when it does not verify."""
    try:
        claims = jwt.decode(
            token,
            config.secret,
            algorithms=[ALGORITHM],  # never taken from the token: no "none", no key confusion
            audience=config.audience,
            options={"require": ["exp", "iat", "sub"]},
        )
    except jwt.PyJWTError as exc:
        raise InvalidToken(type(exc).__name__) from exc
    if not isinstance(claims["iat"], int | float) or \
            claims["exp"] - claims["iat"] > config.max_lifetime_s:
        raise InvalidToken("lifetime over the maximum")
    subject = claims.get("sub")
    if not isinstance(subject, str) or id_fault(subject, MAX_ID_CHARS) is not None:
        raise InvalidToken("subject is no valid user id")
    return subject


def _unauthorized(error: str | None) -> HTTPException:
    challenge = "Bearer" if error is None else f'Bearer error="{error}"'
    return HTTPException(
        status.HTTP_401_UNAUTHORIZED,
        detail="a valid bearer token is required",
        headers={"WWW-Authenticate": challenge},
    )


async def token_subject(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """The verified subject of the request's bearer token, or 401."""
    if credentials is None:
        raise _unauthorized(None)
    config: AuthConfig = request.app.state.auth
    try:
        return verify_token(config, credentials.credentials)
    except InvalidToken:
        raise _unauthorized("invalid_token") from None


async def path_user(
    user_id: Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS,
                                 description="The user; must be the token's subject."),
                       AfterValidator(valid_id)],
    subject: Annotated[str, Depends(token_subject)],
) -> str:
    """The path's user, once the token proves the caller is that user; else 401 or 403."""
    if user_id != subject:
        # Same answer whether or not the other user exists or has facts.
        raise HTTPException(status.HTTP_403_FORBIDDEN, detail="the token is not for this user")
    return user_id


AuthedUser = Annotated[str, Depends(path_user)]
TokenSubject = Annotated[str, Depends(token_subject)]
