"""The memory API's settings: ``ApiSettings``, the fleet's (worker.config.Settings) and
the API's own, read once by the API process's entry (`memfleet api`, api_stub.chat_app)
and passed down. No other process reads the API's own: a worker, the exporter, the
webhook and the other commands leave MEMFLEET_JWT_*, MEMFLEET_API_*, MEMFLEET_CHAT_*
and MEMFLEET_PANEL_* alone (``extra="ignore"``), so one environment serves them all.

Importable without the `api` extra (no FastAPI here): `memfleet api` reads these
settings before it finds out whether the extra is installed.
"""

from __future__ import annotations

import re

from pydantic import Field, SecretStr, field_validator

from worker.config import Settings


class ApiSettings(Settings):
    """The fleet's settings and the memory API's own (docs/settings.md, "The memory API")."""

    # HS256 key the chat server signs users' tokens with; the API refuses to start without
    # it, or with one shorter than 32 bytes (worker.api.auth.AuthConfig.from_settings, when
    # the app is built: `memfleet api --write-openapi` needs none).
    jwt_secret: SecretStr | None = None
    jwt_audience: str | None = None  # set: tokens must carry this `aud`
    jwt_issuer: str | None = None  # set: tokens must carry this `iss`
    jwt_max_lifetime_s: float = Field(default=86_400, gt=0)  # longer-lived tokens: 401
    # Clock skew forgiven between the token's signer and the API (exp, iat, nbf).
    jwt_leeway_s: float = Field(default=30.0, ge=0, le=300)
    # Larger requests get 413 before the app reads them (worker.api.guards).
    api_max_body_bytes: int = Field(default=1_048_576, gt=0)
    api_max_query_bytes: int = Field(default=8_192, gt=0)
    # Serve the OpenAPI document at /openapi.json. Off by default (it maps the API for
    # anyone who can reach it); never /docs or /redoc, whose pages load from a CDN.
    api_docs: bool = False
    # The memory panel's (GET /panel) CSP frame-ancestors: who may embed it in a frame.
    # 'none' (no one) unless a chat product names its own origin (docs/panel.md).
    panel_frame_ancestors: str = "'none'"
    # Exports (worker.api.exports): each snapshot is read whole into a spool (memory, then
    # an unlinked temporary file) and its pooled connection given back before a byte is
    # sent, so a client that does not read holds no connection and no transaction.
    api_exports_per_user: int = Field(default=2, ge=1)  # at once, fleet-wide; more: 429
    api_exports_max: int = Field(default=8, ge=1)  # at once per API process; more: 503
    api_export_acquire_timeout_s: float = Field(default=5.0, gt=0)  # wait for a connection
    api_export_read_timeout_s: float = Field(default=120.0, gt=0)  # snapshot into the spool
    # A response (an export or any other) the client takes nothing of for this long is
    # cut: its connection is aborted.
    api_send_timeout_s: float = Field(default=30.0, gt=0)
    # Long-lived requests open at once in one API process (worker.api.long_polls): the
    # hand-over waits (GET .../wait) and the event streams (GET /events, each with a
    # Redis connection of its own). Past a caller's share (a service key's, an end
    # user's token's): 429; past the process's: 503; both with Retry-After.
    api_waits_max: int = Field(default=256, ge=1)
    api_waits_per_key: int = Field(default=128, ge=1)
    api_waits_per_user: int = Field(default=4, ge=1)
    api_event_streams_max: int = Field(default=32, ge=1)
    api_event_streams_per_key: int = Field(default=4, ge=1)
    # Manual fact writes (add, remove, pin, unpin, consent) per user, fleet-wide through
    # Redis: this many a minute on average, up to the burst at once; more: 429. 0: none.
    api_fact_writes_per_minute: int = Field(default=60, ge=0)
    api_fact_write_burst: int = Field(default=20, ge=1)
    # Erases (DELETE /users/{u}) and consent changes per user, fleet-wide through Redis:
    # this many an hour on average, up to the burst at once; more: 429. 0: none.
    api_erases_per_hour: int = Field(default=30, ge=0)
    api_erase_burst: int = Field(default=5, ge=1)

    # --- The chat stand-in (api_stub.chat_routes), a reference chat server for demos,
    # benches and tests, served with the memory API by api_stub.chat_app: its routes are
    # not mounted unless this is on (`memfleet api` refuses it). Never in production: it
    # lets an end user's token feed memory any conversation.
    chat_standin: bool = False
    # It keeps a session's messages this long after its last turn: a conversation
    # paused overnight goes on; memory keeps what matters, not a noeviction Redis.
    chat_ttl_s: int = Field(default=86_400, gt=0)
    # Turns per user, fleet-wide through Redis: this many a minute on average, up to the
    # burst at once; more: 429 before any answer is made (a model's spend). 0: none.
    chat_turns_per_minute: int = Field(default=20, ge=0)
    chat_turn_burst: int = Field(default=10, ge=1)
    # Sessions of one user with a turn within chat_ttl_s; a new one beyond: 429.
    chat_sessions_per_user: int = Field(default=16, ge=1)
    # How long the stand-in takes to answer, as a chat model would (benches, demos): the
    # turns waiting for their answer are the turns in flight of a real chat server.
    chat_answer_ms: int = Field(default=0, ge=0, le=60_000)
    # The stand-in's chat model, an OpenAI-compatible endpoint (the project's stub in
    # tests): unset, the stand-in answers its canned line and calls no model. With it, the
    # turn's prompt is the persona, the stable block, then the volatile block (docs/prompt.md)
    # and the model is offered the memory tools (docs/tools.md), at most
    # chat_tool_rounds rounds of tool calls a turn (0: no tools offered).
    chat_model_base_url: str | None = None
    chat_model_api_key: SecretStr | None = None
    chat_model: str = "gpt-4o-mini"
    chat_model_timeout_s: float = Field(default=30.0, gt=0, le=300)
    chat_tool_rounds: int = Field(default=3, ge=0, le=10)
    # --- end of the chat stand-in.

    @field_validator("panel_frame_ancestors")
    @classmethod
    def _frame_ancestors(cls, value: str) -> str:
        return frame_ancestors_sources(value)


# A CSP source as frame-ancestors takes it, with a host: 'self', or an optional
# scheme, a host (a leading *. allowed) and an optional port, nothing after it.
# Anything else (';', ',', a path, a quote) could end the directive and write
# another; a bare scheme (https:, data:) or * would let any site frame the panel,
# whose Remove and memory switch act in one click.
_FRAME_SOURCE = re.compile(
    r"'self'|(?:[a-z][a-z0-9+.-]*://)?(?P<host>(?:\*\.)?[a-z0-9-]+(?:\.[a-z0-9-]+)*)"
    r"(?::(?:[0-9]{1,5}|\*))?",
    re.IGNORECASE)


def _frame_source(source: str) -> bool:
    match = _FRAME_SOURCE.fullmatch(source)
    if match is None:
        return False
    host = match["host"] or ""
    # A wildcard covers one site's subdomains: *.example.com, never *.com.
    return not host.startswith("*.") or "." in host[2:]


def frame_ancestors_sources(value: str) -> str:
    """MEMFLEET_PANEL_FRAME_ANCESTORS as one directive's sources, single-spaced: 'none'
    alone, or 'self' and origins with a host; ValueError naming the rule, never the value."""
    sources = value.split()
    if sources == ["'none'"]:
        return "'none'"
    if not sources or not all(_frame_source(s) for s in sources):
        raise ValueError("must be 'none', or space-separated 'self' and origins with a host "
                         "(https://chat.example.com, https://*.example.com:8443); a bare "
                         "scheme (https:) or * would let any site frame the panel")
    return " ".join(sources)
