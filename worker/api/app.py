"""The memory API as one ASGI app: ``create_app(settings, extensions=...)``.

The lifespan builds every client (PostgreSQL pool, Redis, providers) and closes
them; nothing is created at import time. Its settings are the API's own,
``ApiSettings`` (worker.api.settings), with resolved server URLs (``worker.api.serve``
resolves the embedded ones) and MEMFLEET_JWT_SECRET.
What is served with it but is not the product (the chat stand-in) comes in as
extensions (worker.api.extensions).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import SecretStr
from redis.asyncio import Redis

from worker.api import (
    event_routes,
    handover_routes,
    memory_routes,
    note_routes,
    panel_page,
    panel_routes,
    persons_routes,
    portrait_routes,
    prompt_routes,
    readiness,
    session_routes,
)
from worker.api.auth import AuthConfig
from worker.api.deps import ApiDeps
from worker.api.errors import install_handlers
from worker.api.event_stream import STATE_KEY, EventStreams
from worker.api.exports import ExportGate
from worker.api.extensions import CHAT_STANDIN, Extension, erase_hooks
from worker.api.guards import AccessLog, NoStore, SizeLimits
from worker.api.handover_fast import HandoverFastPath
from worker.api.long_polls import event_stream_slots, wait_slots
from worker.api.service_auth import ServiceKeyCheck
from worker.api.settings import ApiSettings
from worker.api.wait_poller import WaitPoller
from worker.api.write_rate import erase_rate, fact_write_rate
from worker.config import secret
from worker.errors import ConfigurationError
from worker.fleet.gc_tuning import quiet_garbage_collector
from worker.memory_rules import Limits
from worker.protocol.keys import events_key
from worker.protocol.shards import ShardedRedis
from worker.providers.factory import build_providers, embedding_model
from worker.read_split import SplitPolicy
from worker.store.fence_key import fence_keys
from worker.store.maintenance import PostgresMaintenanceStore
from worker.store.migrate import check_schema
from worker.store.pool import close_pool, create_pool
from worker.store.postgres import PostgresStore
from worker.store.service_keys import ServiceKeyStore

TITLE = "memfleet memory API"
VERSION = "0.1.0"
DESCRIPTION = (
    "A user's long-term memory: list, add, remove (supersede), trace and search facts, "
    "erase everything; hand sessions over to the workers. "
    "Every endpoint takes a bearer credential: an end user's HS256 token whose `sub` is "
    "the user, or a chat server's service key (`mfk_...`) whose scopes allow the route."
)
OPENAPI_PATH = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"  # in a checkout
OPENAPI_URL = "/openapi.json"  # served only with MEMFLEET_API_DOCS


def create_app(settings: ApiSettings, *, extensions: Sequence[Extension] = (),
               tune_gc: bool = False) -> FastAPI:
    """The app; fails at once (ConfigurationError) on settings it cannot run with, and
    with TypeError on the fleet's settings alone (worker.config.Settings: no API's own).

    ``extensions``: what else it serves (worker.api.extensions); MEMFLEET_CHAT_STANDIN
    needs the chat stand-in's, which only api_stub.chat_app passes.
    ``tune_gc``: a server process of its own (``worker.api.serve``) quiets the garbage
    collector once the lifespan has built its clients (worker.fleet.gc_tuning).
    """
    if not isinstance(settings, ApiSettings):
        raise TypeError("the memory API's settings are worker.api.settings.ApiSettings, "
                        f"not {type(settings).__name__}")
    auth = AuthConfig.from_settings(settings)
    if settings.chat_standin and not any(e.name == CHAT_STANDIN for e in extensions):
        raise ConfigurationError(
            "MEMFLEET_CHAT_STANDIN is set, but the chat stand-in is not part of the memory "
            "API: unset it, or serve the stand-in from a source checkout with "
            "`python -m api_stub.chat_app` (docs/api.md)")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        if not settings.database_url or not settings.redis_url:
            raise ConfigurationError("the memory API needs resolved database and Redis URLs")
        # The erase needs them.
        fences = fence_keys(secret(settings.erase_fence_key), settings.home_dir)
        pool = await create_pool(settings.database_url, min_size=settings.db_pool_min,
                                 max_size=settings.db_pool_max)
        redis: Redis | None = None
        sharded: ShardedRedis | None = None
        providers = None
        streams: EventStreams | None = None
        try:
            async with pool.acquire() as conn:
                await check_schema(conn, settings.embed_dim,
                                   embed_model=embedding_model(settings))
            memory = PostgresStore(pool, fences)
            await memory.check_fence_key()
            redis = Redis.from_url(settings.redis_url, socket_timeout=5,
                                   socket_connect_timeout=2)
            if settings.redis_shards:  # several Redis primaries (worker.protocol.shards)
                sharded = ShardedRedis.from_settings(settings, socket_timeout=5,
                                                     socket_connect_timeout=2)
            providers = build_providers(settings)
            streams = EventStreams(settings.redis_url, events_key(settings.queue_name),
                                   slots=event_stream_slots(settings),
                                   send_timeout_s=settings.api_send_timeout_s)
            deps = ApiDeps(
                settings=settings, pool=pool, redis=redis, memory=memory,
                handover=redis if sharded is None else sharded,
                providers=providers, limits=Limits.from_settings(settings),
                exports=ExportGate(redis, PostgresMaintenanceStore(pool), settings),
                writes=fact_write_rate(redis, per_minute=settings.api_fact_writes_per_minute,
                                       burst=settings.api_fact_write_burst),
                erases=erase_rate(redis, per_hour=settings.api_erases_per_hour,
                                  burst=settings.api_erase_burst, fence_secret=fences.secret),
                streams=streams, waits=wait_slots(settings),
                poller=WaitPoller(redis if sharded is None else sharded),
            )
            app.state.deps = replace(deps, erase_hooks=erase_hooks(app, deps, extensions))
            app.state.service_keys = ServiceKeyCheck(ServiceKeyStore(pool))
            if tune_gc:
                quiet_garbage_collector()
            # The server's shutdown ends the open streams through it (worker.api.serve).
            yield {STATE_KEY: streams}
        finally:
            if streams is not None:
                streams.close()
            if (built := getattr(app.state, "deps", None)) is not None:
                await built.poller.aclose()  # the waits' shared reads
            if providers is not None:
                await providers.aclose()
            if redis is not None:
                await redis.aclose()
            if sharded is not None:
                await sharded.aclose()
            await close_pool(pool)  # bounded: a request cut mid-query may hold one

    # No Swagger UI or ReDoc: FastAPI's pages load their scripts from a CDN. The
    # document itself only when asked (MEMFLEET_API_DOCS); docs/openapi.json has it.
    app = FastAPI(title=TITLE, version=VERSION, description=DESCRIPTION, lifespan=lifespan,
                  docs_url=None, redoc_url=None,
                  openapi_url=OPENAPI_URL if settings.api_docs else None)
    app.state.auth = auth
    app.state.split_policy = SplitPolicy.from_settings(settings)  # the prompt split's
    app.state.panel = panel_page.PanelFiles.load(settings.panel_frame_ancestors)
    install_handlers(app)
    app.add_middleware(HandoverFastPath)  # inside SizeLimits: a body within the limit
    # Added last, run first: the access log sees every request, a 413 included.
    app.add_middleware(SizeLimits, max_body_bytes=settings.api_max_body_bytes,
                       max_query_bytes=settings.api_max_query_bytes)
    app.add_middleware(AccessLog)
    app.add_middleware(NoStore)
    for extension in extensions:  # the chat stand-in: never in production (docs/api.md)
        for router in extension.routers:
            app.include_router(router)
    app.include_router(memory_routes.router)
    app.include_router(note_routes.router)  # notes beside facts (docs/notes.md)
    app.include_router(prompt_routes.router)  # the prompt split (docs/prompt.md)
    app.include_router(portrait_routes.router)  # the user's portrait (docs/portrait.md)
    app.include_router(panel_routes.router)  # the user's corrections: edit, held proposals
    app.include_router(persons_routes.router)  # the people in the user's life (docs/persons.md)
    app.include_router(handover_routes.router)
    app.include_router(session_routes.router)
    app.include_router(event_routes.router)
    app.include_router(panel_page.router)  # the memory panel's page (docs/panel.md)

    # Liveness: the process answers, whatever Redis and PostgreSQL do (a restart would
    # not bring them back). Readiness, /readyz, asks them (worker.api.readiness).
    @app.get("/healthz", tags=["ops"], summary="Liveness (no authentication)")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    app.state.readiness = readiness.Readiness()
    app.include_router(readiness.router)

    return app


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document; it depends on no setting (docs/openapi.json is this): the
    production API's, without the chat stand-in."""
    placeholder = ApiSettings(jwt_secret=SecretStr("x" * 32),
                              database_url="postgresql://unused", redis_url="redis://unused",
                              chat_standin=False)
    return create_app(placeholder).openapi()


def openapi_json() -> str:
    return json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"
