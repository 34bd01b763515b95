"""docs/openapi.json is what the app generates: no server needed to find it stale."""

from __future__ import annotations

import json

import pytest
from pydantic import SecretStr

from worker.api.app import OPENAPI_PATH, create_app, openapi_document, openapi_json
from worker.api.settings import ApiSettings
from worker.errors import ConfigurationError


def test_the_committed_openapi_document_is_the_generated_one() -> None:
    assert OPENAPI_PATH.read_text("utf-8") == openapi_json(), (
        "docs/openapi.json is stale: memfleet api --write-openapi docs/openapi.json"
    )


def test_the_document_has_the_memory_model_routes_and_fields() -> None:
    document = openapi_document()
    paths = document["paths"]
    assert {"put", "delete"} <= set(paths["/users/{user_id}/facts/{fact_id}/pin"])
    assert "get" in paths["/users/{user_id}/held-proposals"]
    for path in ("/users/{user_id}/facts", "/users/{user_id}/search"):
        names = {p["name"] for p in paths[path]["get"]["parameters"]}
        assert {"scope", "agent_id", "valid_at", "known_at"} <= names, path
    fact = document["components"]["schemas"]["Fact"]["properties"]
    assert {"scope", "agent_id", "valid_from", "valid_to", "expires_at", "pinned", "basis",
            "confidence", "superseded_reason", "embedding_model", "embedding_dim"} <= set(fact)
    assert json.loads(openapi_json()) == document


def test_no_docs_page_and_the_document_only_when_enabled() -> None:
    settings = ApiSettings(jwt_secret=SecretStr("x" * 32), database_url="postgresql://unused",
                           redis_url="redis://unused")
    paths = {getattr(r, "path", None) for r in create_app(settings).routes}
    assert not paths & {"/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"}
    enabled = create_app(settings.model_copy(update={"api_docs": True}))
    paths = {getattr(r, "path", None) for r in enabled.routes}
    assert "/openapi.json" in paths and not paths & {"/docs", "/redoc"}


def test_the_product_refuses_the_chat_stand_in_setting_and_never_publishes_it() -> None:
    # The stand-in plugged in is tests/unit/api_stub/test_chat_app.py's.
    settings = ApiSettings(jwt_secret=SecretStr("x" * 32), database_url="postgresql://unused",
                           redis_url="redis://unused", chat_standin=True)
    with pytest.raises(ConfigurationError, match="MEMFLEET_CHAT_STANDIN"):
        create_app(settings)
    published = openapi_document()
    assert not [p for p in published["paths"] if p.startswith("/chat")]
    assert "chat" not in {t for op in published["paths"].values() for v in op.values()
                          for t in v.get("tags", [])}
