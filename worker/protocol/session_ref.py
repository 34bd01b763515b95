"""A session as memfleet knows it: the pair (user_id, session_id).

Chat products number sessions per user ("1", "2", ...), so a session id alone
names nothing. Every per-session Redis key ends in ``SessionRef.key``:
``{<user>}:<session>``, the user escaped inside a Redis Cluster hash tag so
that one user's keys share a slot, and so that the pair can be read back
without doubt from a key or a set member (``SessionRef.parse``): the escaped
user holds no ``}``, so the first ``}`` ends it.
"""

from __future__ import annotations

from dataclasses import dataclass

# '%' first: it escapes the others.
_ESCAPES = (("%", "%25"), ("{", "%7B"), ("}", "%7D"))


def user_tag(user_id: str) -> str:
    """``{<user>}``: the hash tag every Redis key of the user carries."""
    escaped = user_id
    for raw, code in _ESCAPES:
        escaped = escaped.replace(raw, code)
    return "{" + escaped + "}"


def _unescape(escaped: str) -> str:
    for raw, code in reversed(_ESCAPES):
        escaped = escaped.replace(code, raw)
    return escaped


@dataclass(frozen=True, slots=True)
class SessionRef:
    user_id: str
    session_id: str

    @property
    def key(self) -> str:
        return f"{user_tag(self.user_id)}:{self.session_id}"

    @classmethod
    def parse(cls, key: str) -> SessionRef:
        """The pair back from ``key``; ValueError when it is not one."""
        end = key.find("}")
        if not key.startswith("{") or end < 0 or key[end + 1:end + 2] != ":":
            raise ValueError("not a session key")
        return cls(_unescape(key[1:end]), key[end + 2:])
