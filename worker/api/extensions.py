"""What the memory API serves beyond itself, plugged in by whoever builds the app.

The product (`memfleet api`) has none. Something that is not the product but is
served with it, the chat stand-in above all (api_stub.chat_app, a reference chat
server in a source checkout), passes its ``Extension`` to ``create_app``: the
routers the app mounts, and ``start``, called in the lifespan once the clients
are built, which keeps what its routes need on ``app.state`` and returns the
hooks an erase of a user runs first (each returns the counts it reports under
``deleted``). worker.api never imports its extensions: they import it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fastapi import APIRouter, FastAPI

from worker.api.deps import ApiDeps, EraseHook

# The extension that serves MEMFLEET_CHAT_STANDIN's routes: the setting without it
# is a mistake the app refuses at once (worker.api.app).
CHAT_STANDIN = "chat-standin"

StartHook = Callable[[FastAPI, ApiDeps], Sequence[EraseHook]]


@dataclass(frozen=True, slots=True)
class Extension:
    name: str
    routers: tuple[APIRouter, ...] = ()
    start: StartHook | None = None


def erase_hooks(app: FastAPI, deps: ApiDeps, extensions: Sequence[Extension]
                ) -> tuple[EraseHook, ...]:
    """Every extension's ``start`` called once, in order: their erase hooks."""
    return tuple(hook for ext in extensions if ext.start is not None
                 for hook in ext.start(app, deps))


async def erase_extras(deps: ApiDeps, user_id: str) -> dict[str, int]:
    """The erase hooks run for ``user_id``, in order; their counts, merged."""
    counts: dict[str, int] = {}
    for hook in deps.erase_hooks:
        counts.update(await hook(user_id))
    return counts
