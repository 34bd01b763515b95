"""Redis Lua scripts kept in .lua files, loaded once and called by SHA.

``EVALSHA`` sends 40 bytes instead of the script; a server that does not know
the script yet (first call, or a restart flushed its cache) answers NOSCRIPT,
and the call falls back to ``EVAL``, which also caches it for the next time.

A script cannot load another, so what two scripts share lives in a file of its
own that each names in ``after``: its text is put before theirs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib import resources
from typing import Any

from redis.exceptions import NoScriptError

# ``messages_of(payload)``: the JSON text of a hand-over payload's message list.
PAYLOAD_MESSAGES = ("worker.protocol.lua", "payload_messages.lua")
# ``live_jobs`` and ``watch_suspects``: how a job held by a dead worker is told.
ORPHANS = ("worker.protocol.lua", "orphans.lua")


class LuaScript:
    __slots__ = ("name", "sha", "text")

    def __init__(self, package: str, filename: str, *,
                 after: Sequence[tuple[str, str]] = ()) -> None:
        """The script in ``package``'s ``filename``, after the files ``after`` names
        (package, filename), in that order."""
        self.name = filename
        self.text = "".join(_read(*shared) for shared in after) + _read(package, filename)
        self.sha = hashlib.sha1(self.text.encode()).hexdigest()  # noqa: S324 - Redis names scripts by SHA-1

    async def __call__(self, redis: Any, keys: list[Any], args: list[Any]) -> Any:
        try:
            return await redis.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await redis.eval(self.text, len(keys), *keys, *args)


def _read(package: str, filename: str) -> str:
    return resources.files(package).joinpath(filename).read_text("utf-8")
