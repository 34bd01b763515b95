"""The memory API with the chat stand-in plugged in: ``python -m api_stub.chat_app``.

worker.api is the product and never imports api_stub; the stand-in comes in as an
extension (worker.api.extensions) when the app is built here. Its erase hook is
always there, so an erase clears the stand-in's conversations (``chat_sessions``)
whether its routes are mounted or not; the routes, ``POST /chat/{session_id}``,
only with MEMFLEET_CHAT_STANDIN (never in production: docs/api.md). The options
are `memfleet api`'s (worker.cli.api); tests, benches and the conformance suite
serve the API this way when they chat.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping

from fastapi import FastAPI
from pydantic import ValidationError

from api_stub.chat_log import ChatLog
from api_stub.chat_model import ChatModel
from api_stub.chat_routes import router as chat_router
from worker.api import serve
from worker.api.app import create_app as create_memory_api
from worker.api.deps import ApiDeps, EraseHook
from worker.api.extensions import CHAT_STANDIN, Extension
from worker.api.settings import ApiSettings
from worker.cli.api import add_options
from worker.config import settings_error
from worker.errors import MemfleetError

FACTORY = "api_stub.chat_app:app_from_env"


def stand_in(settings: ApiSettings) -> Extension:
    """The chat stand-in as an extension: its routes only with MEMFLEET_CHAT_STANDIN."""
    routers = (chat_router,) if settings.chat_standin else ()
    return Extension(name=CHAT_STANDIN, routers=routers, start=_start)


def _start(app: FastAPI, deps: ApiDeps) -> tuple[EraseHook, ...]:
    chat = ChatLog.from_settings(deps.redis, deps.settings)
    app.state.chat_log = chat  # what the routes use
    app.state.chat_model = ChatModel.from_settings(deps.settings)  # None: canned answers

    async def erase(user_id: str) -> Mapping[str, int]:
        return {"chat_sessions": await chat.erase_user(user_id)}

    return (erase,)


def create_app(settings: ApiSettings, *, tune_gc: bool = False) -> FastAPI:
    """worker.api.app's create_app with the stand-in plugged in."""
    return create_memory_api(settings, extensions=(stand_in(settings),), tune_gc=tune_gc)


def app_from_env() -> FastAPI:
    """What uvicorn calls in each server process."""
    return serve.app_from_env(create_app)


def main(argv: list[str] | None = None, *, prog: str = "python -m api_stub.chat_app") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    add_options(parser)
    args = parser.parse_args(argv)
    try:
        return serve.serve(ApiSettings(), args, factory=FACTORY, create=create_app)
    except ValidationError as exc:
        print(f"api_stub: {settings_error(exc)}", file=sys.stderr)
    except MemfleetError as exc:
        print(f"api_stub: {exc}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
