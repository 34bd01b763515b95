"""The key of a user's erase fence (memory_erasure_fence.user_key).

An erase leaves one row behind for a while: the fence that keeps jobs already
holding the user's hand-overs from writing them back (worker.ops.privacy). It names
the user by HMAC-SHA-256 of the user id under MEMFLEET_ERASE_FENCE_KEY, so the
table (or a backup of it) cannot be reversed by hashing a dictionary of likely
ids (emails, phone numbers, sequential numbers), as a plain sha256 could.

Its own key, not MEMFLEET_TELEMETRY_ID_KEY: that one goes to chat servers too
and keys the user stand-ins in spans kept by the tracing backend after an erase,
and a process without it draws a key of its own, which a fence cannot: every
process that writes or reads fences (workers, the API, the CLI's erase and
import) must compute the same key. A process that needs it and has none stops
with ConfigurationError; nothing falls back to an unkeyed hash. With the
embedded servers (no MEMFLEET_DATABASE_URL) a random key is made once and kept
beside them, under MEMFLEET_HOME_DIR (worker.cli.common.resolve); a process
without MEMFLEET_ERASE_FENCE_KEY uses the key file of its home directory when
there is one (a development machine, a bench), and refuses otherwise.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from worker.errors import ConfigurationError

# Shorter keys are refused: the key is all that stands between a fence and its user.
MIN_KEY_CHARS = 32
# Domain separation: the same secret used elsewhere by mistake still gives other values.
_DOMAIN = b"memfleet:erase-fence:"
_CHECK = b"memfleet:erase-fence-key-check"
EMBEDDED_KEY_FILE = "erase-fence.key"


@dataclass(frozen=True, slots=True)
class FenceKeys:
    """Computes fence keys; the secret stays out of repr and logs."""

    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.secret) < MIN_KEY_CHARS:
            raise ConfigurationError(
                f"MEMFLEET_ERASE_FENCE_KEY must be at least {MIN_KEY_CHARS} characters")

    def of(self, user_id: str) -> bytes:
        return hmac.new(self.secret, _DOMAIN + user_id.encode("utf-8"), hashlib.sha256).digest()

    def check_value(self) -> bytes:
        """What memory_erasure_fence_key records of the key: tells two keys apart,
        gives nothing of either (not a fence key of any user: another domain)."""
        return hmac.new(self.secret, _CHECK, hashlib.sha256).digest()


def fence_keys(configured: str | None, home: Path | None = None) -> FenceKeys:
    """The fence keys of MEMFLEET_ERASE_FENCE_KEY, else of the key file the embedded
    servers keep under ``home`` (MEMFLEET_HOME_DIR); ConfigurationError with neither."""
    if not configured and home is not None and (home / EMBEDDED_KEY_FILE).is_file():
        configured = (home / EMBEDDED_KEY_FILE).read_text("ascii").strip()
    if not configured:
        raise ConfigurationError(
            "MEMFLEET_ERASE_FENCE_KEY is not set: every process that erases users or"
            " commits their memory needs the same secret (docs/operations.md)")
    return FenceKeys(configured.encode("utf-8"))


def embedded_key(home: Path) -> str:
    """The key kept beside the embedded servers under ``home``, made once (0600).
    Written aside and linked into place, so a process starting at the same moment
    reads the whole key or makes its own attempt, never half a file."""
    path = home / EMBEDDED_KEY_FILE
    if not path.exists():
        draft = home / f".{EMBEDDED_KEY_FILE}.{os.getpid()}"
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(secrets.token_hex(32))
        try:
            os.link(draft, path)
        except FileExistsError:
            pass  # another process made it first: theirs is the key
        finally:
            draft.unlink()
    return path.read_text("ascii").strip()
