"""api_stub.chat_app plugs the chat stand-in into the memory API: its routes only when
asked, its erase hook always; the product app never has them."""

from __future__ import annotations

from pydantic import SecretStr

from api_stub import chat_app
from worker.api.app import create_app
from worker.api.extensions import CHAT_STANDIN
from worker.api.settings import ApiSettings

SETTINGS = ApiSettings(jwt_secret=SecretStr("x" * 32), database_url="postgresql://unused",
                       redis_url="redis://unused", chat_standin=False)
CHAT = "/chat/{session_id}"


def test_the_chat_routes_are_mounted_only_when_asked() -> None:
    assert CHAT not in chat_app.create_app(SETTINGS).openapi()["paths"]
    mounted = chat_app.create_app(SETTINGS.model_copy(update={"chat_standin": True}))
    assert CHAT in mounted.openapi()["paths"]
    assert CHAT not in create_app(SETTINGS).openapi()["paths"]


def test_the_stand_in_always_brings_its_erase_hook() -> None:
    for on in (False, True):
        extension = chat_app.stand_in(SETTINGS.model_copy(update={"chat_standin": on}))
        assert extension.name == CHAT_STANDIN and extension.start is not None
        assert bool(extension.routers) is on
