"""Redis Lua scripts kept in .lua files, loaded once and called by SHA.

``EVALSHA`` sends 40 bytes instead of the script; a server that does not know
the script yet (first call, or a restart flushed its cache) answers NOSCRIPT,
and the call falls back to ``EVAL``, which also caches it for the next time.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any

from redis.exceptions import NoScriptError


class LuaScript:
    __slots__ = ("name", "sha", "text")

    def __init__(self, package: str, filename: str) -> None:
        self.name = filename
        self.text = resources.files(package).joinpath(filename).read_text("utf-8")
        self.sha = hashlib.sha1(self.text.encode()).hexdigest()  # noqa: S324 - Redis names scripts by SHA-1

    async def __call__(self, redis: Any, keys: list[Any], args: list[Any]) -> Any:
        try:
            return await redis.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await redis.eval(self.text, len(keys), *keys, *args)
