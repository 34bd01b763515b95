"""memfleet's settings: read once at the entry point, then passed down.

Every setting is an environment variable with the ``MEMFLEET_`` prefix. Nothing
below the CLI or the ARQ settings reads the environment itself. ``Settings`` are
the fleet's, read by every process (workers, the exporter, the webhook, the CLI);
the memory API's own come on top of them in ``worker.api.settings.ApiSettings``,
read by the API process alone. ``Settings`` ignore the API's variables, so one
environment (a compose file, a .env) can serve every process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from worker.memory_rules import (
    DEFAULT_MAX_HANDOVER_BYTES,
    DEFAULT_MAX_ID_CHARS,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_MESSAGE_CHARS,
    DEFAULT_MAX_MESSAGES,
    DEFAULT_MAX_SESSION_BYTES,
    DEFAULT_MAX_USER_SESSIONS,
    byte_limits_fault,
)
from worker.redis_shards import DEFAULT_SHARD, shard_entries, shard_names

# What each server URL may start with: the drivers' own schemes (asyncpg, redis-py).
SERVER_URL_SCHEMES = {"database_url": ("postgresql", "postgres"),
                      "redis_url": ("redis", "rediss", "unix")}


class Settings(BaseSettings):
    # extra="ignore": a MEMFLEET_* variable of no field here (the API's own, in a shared
    # environment) is left alone, not refused.
    model_config = SettingsConfigDict(env_prefix="MEMFLEET_", extra="ignore", frozen=True)

    # Servers. Unset (or empty) means: the embedded ones under home_dir (`memfleet up`).
    database_url: str | None = None
    redis_url: str | None = None
    home_dir: Path = Path(".memfleet")
    # --- Several Redis primaries (worker.protocol.shards; docs/operations.md, "Several
    # Redis"): `name=url` entries, comma or space separated, in a fixed order. Unset:
    # MEMFLEET_REDIS_URL is the one shard, named `default`. Set: MEMFLEET_REDIS_URL is
    # the first shard's URL (unset, or the same). A shard being added is named in
    # MEMFLEET_REDIS_SHARDS_PENDING, then in MEMFLEET_REDIS_SHARDS_JOINING, never both.
    redis_shards: str | None = None
    redis_shards_pending: str | None = None
    redis_shards_joining: str | None = None
    # --- end of the shard map.

    # Providers.
    llm_provider: Literal["openai", "rules"] = "rules"
    llm_base_url: str | None = None
    llm_api_key: SecretStr | None = None
    extract_model: str = "gpt-4o-mini"
    consolidate_model: str = "gpt-4o-mini"
    summary_model: str | None = None
    # `memfleet eval --qa` (docs/eval.md): the model that answers the questions (None: the
    # extraction model), and the judge that grades the answers (None: exact match only).
    eval_answer_model: str | None = None
    eval_judge_model: str | None = None
    # local: all-MiniLM-L6-v2 on this machine, from a registry package (docs/eval.md)
    embed_provider: Literal["openai", "hashing", "local"] = "hashing"
    embed_base_url: str | None = None
    embed_api_key: SecretStr | None = None
    embed_model: str = "text-embedding-3-small"
    embed_dim: int = Field(default=1536, ge=8, le=16000)
    # Hash partitions of each per-user table, fixed when `memfleet migrate` partitions
    # them (install); migrate refuses another count later (docs/capacity.md).
    pg_partitions: int = Field(default=16, ge=1, le=1024)

    # The queue.
    # worker.protocol.keys.DEFAULT_QUEUE (a top-level module imports no package).
    queue_name: str = "memfleet:queue"
    job_timeout_s: float = Field(default=300.0, gt=0)
    max_tries: int = Field(default=8, ge=1)
    max_jobs: int = Field(default=10, ge=1)
    # ARQ keeps a finished job's result with its arguments (the user and session
    # ids): not kept by default, so that an erase leaves no id behind in Redis.
    keep_result_s: int = Field(default=0, ge=0)
    # A dead worker's session waits at most about lock_ttl_s + recovery_interval_s.
    # A running job extends its lock every third of the TTL, so the TTL need not
    # cover a job, only a few missed extensions.
    lock_ttl_s: float = Field(default=10.0, gt=0)
    recovery_interval_s: float = Field(default=2.0, gt=0)
    # Tries of each Redis command while Redis is unreachable, backing off up to 3 s
    # between tries: about two minutes of outage ridden out before a worker exits.
    redis_retries: int = Field(default=45, ge=0)
    busy_defer_s: float = Field(default=1.0, gt=0)
    # PostgreSQL still down on a job's last try: its session tries again this much
    # later, with fresh tries, for as long as the outage lasts.
    outage_wait_s: float = Field(default=300.0, gt=0)

    # `memfleet webhook`: where the commit events go, and the key of their signature
    # (required, at least 16 characters, unless unsigned deliveries are chosen).
    webhook_url: str | None = None
    webhook_secret: SecretStr | None = None
    webhook_unsigned: bool = False  # deliveries without a signature (`--unsigned`)
    # The HTTP clients' own request lines (httpx, openai, aiohttp) in the logs, their
    # URLs redacted all the same; off, since they add nothing memfleet does not log.
    log_http_requests: bool = False

    # --- CPU work on user text (worker.protection.cpu_budget): CPU seconds one call
    # of the offline rules provider may spend on a slice, in a thread off the
    # event loop. Over it, the slice is skipped on the record (outcome skipped).
    # The costliest slice the default limits allow (60 messages of 32,000
    # characters of short first-person statements) took 3.7 s on a dev machine.
    provider_cpu_budget_s: float = Field(default=10.0, gt=0, le=600)
    # --- end of CPU work on user text.

    # Consent: whether a user who never chose (memfleet consent) is remembered.
    memory_default: bool = True

    # --- The erase fence (worker.store.fence_key): HMAC key of the user in the fence an
    # erase leaves behind. The same on every worker, API and CLI of a fleet; needed
    # to commit or erase (none: they refuse). The embedded servers get one made.
    erase_fence_key: SecretStr | None = None
    # --- end of the erase fence.

    # The pipeline.
    neighbors_k: int = Field(default=5, ge=1, le=50)
    # Neighbours (stored rows and the batch's earlier candidates) less similar than this
    # (cosine) are not shown; a candidate left with none is added unasked. None: no
    # floor. The scale is the embedder's: 0.4 for all-MiniLM-L6-v2 (docs/eval.md).
    neighbors_min_similarity: float | None = Field(default=None, ge=-1.0, le=1.0)
    context_messages: int = Field(default=4, ge=0)
    max_slice_messages: int = Field(default=60, ge=1)
    summary_every_user_turns: int = Field(default=10, ge=1)
    consolidation_attempts: int = Field(default=4, ge=1)
    # Every worker supersedes facts whose expires_at has come this often
    # (worker.ops.expiry); reads skip them meanwhile. 0: this worker never does.
    expiry_interval_s: float = Field(default=60.0, ge=0)
    # The people in a user's life (docs/persons.md): extraction says who each fact is
    # about, and facts about the user's persons are kept as theirs, never the user's.
    # Off: as before persons (every fact extracted is the user's). Off by default: on the
    # 1.5B model the other kinds gained nothing with it on (docs/persons.md).
    persons: bool = False
    # The read path's section "About the people in the user's life" (the known-facts
    # block, the prompt split's stable block): at most this many facts; 0: none.
    read_people_max_facts: int = Field(default=20, ge=0, le=1000)
    # The known-facts block a read builds (the memory API's, `memfleet eval`'s): all
    # active facts up to this many, else the top-k by relevance.
    read_top_k: int = Field(default=50, ge=1, le=1000)
    # The prompt split (worker.read_split, docs/prompt.md): the stable block holds at
    # most this many facts and UTF-8 bytes; the volatile block the turn's top-k by
    # relevance, re-ranked: + pin boost if pinned, + agent boost if the assistant's
    # relationship fact, - recency penalty x min(1, age in days / recency days).
    read_stable_max_facts: int = Field(default=40, ge=0, le=1000)
    read_stable_max_bytes: int = Field(default=4096, ge=0, le=1_000_000)
    read_volatile_top_k: int = Field(default=8, ge=1, le=100)
    read_rerank_pin_boost: float = Field(default=0.20, ge=0, le=10)
    read_rerank_agent_boost: float = Field(default=0.10, ge=0, le=10)
    read_rerank_recency_penalty: float = Field(default=0.10, ge=0, le=10)
    read_rerank_recency_days: float = Field(default=90.0, gt=0, le=36500)
    # --- The user's portrait (docs/portrait.md): a short narrative of the user, written
    # by the fleet from the active profile facts after commits, at most once per
    # portrait_min_interval minutes unless portrait_max_commits commits come first. Off
    # by default: it costs a model call per user and interval.
    portrait_enabled: bool = False
    portrait_min_interval: float = Field(default=10.0, ge=0, le=10080)  # minutes
    portrait_max_commits: int = Field(default=20, ge=1, le=100_000)
    portrait_model: str | None = None  # None: the summaries' model
    portrait_max_facts: int = Field(default=60, ge=1, le=200)  # wire.MAX_PORTRAIT_FACTS
    portrait_max_words: int = Field(default=120, ge=10, le=300)  # wire.MAX_PORTRAIT_WORDS
    # The prompt split's stable block opens with the user's portrait (docs/prompt.md).
    read_stable_portrait: bool = False
    # --- end of the portrait.
    # --- Notes beside facts (docs/notes.md). On: extraction may answer notes beside its
    # facts (free-form context that is no one fact), kept with supersession, searched,
    # and promoted to a fact by the fleet's promotion job when similar notes (closer
    # than the distance, cosine) come from at least that many sessions. Off: requests
    # and answers are exactly those without notes, and no promotion pass runs.
    notes_enabled: bool = False
    notes_promote_distance: float = Field(default=0.15, gt=0, lt=2)
    notes_promote_sessions: int = Field(default=3, ge=2, le=100)
    # Each worker runs the promotion pass this often, one worker at a time in the fleet
    # (a lock); 0: never on this worker. At most notes_promote_users users per pass.
    notes_promote_interval_s: float = Field(default=86_400.0, ge=0)
    notes_promote_users: int = Field(default=100, ge=1, le=100_000)
    # Reads for a prompt (the known-facts block): up to this many notes relevant to the
    # query, in a section of their own after the facts; 0: none. Never in the prompt
    # split's stable block.
    read_notes_top_k: int = Field(default=0, ge=0, le=50)
    # --- end of notes.
    # How often a worker looks for jobs while it has a free slot: a slot freed by a
    # finished job waits for the next look (ARQ does not wake its loop for it), so
    # a busy worker loses up to this much per job. Idle, each look is one ZRANGEBYSCORE.
    poll_delay_s: float = Field(default=0.1, gt=0, le=5)

    # Hand-over limits (bad input is refused at the door with a clear error).
    max_message_chars: int = Field(default=DEFAULT_MAX_MESSAGE_CHARS, ge=1)
    max_messages: int = Field(default=DEFAULT_MAX_MESSAGES, ge=1)
    max_id_chars: int = Field(default=DEFAULT_MAX_ID_CHARS, ge=1)
    # Byte budgets (UTF-8; worker.memory_rules says why each default): a message; a
    # hand-over's payload (a longer list goes as its newest window that fits); a
    # session's lists in Redis, latest and older together; and how many sessions
    # of one user may hold unfinished lists in Redis at once. The last two are kept
    # by Redis itself (worker/protocol/lua/enqueue.lua): a full budget refuses the hand-over.
    max_message_bytes: int = Field(default=DEFAULT_MAX_MESSAGE_BYTES, ge=1)
    max_handover_bytes: int = Field(default=DEFAULT_MAX_HANDOVER_BYTES, ge=1)
    max_session_bytes: int = Field(default=DEFAULT_MAX_SESSION_BYTES, ge=1)
    max_user_sessions: int = Field(default=DEFAULT_MAX_USER_SESSIONS, ge=1)

    # Telemetry. Nothing is exported unless asked; /metrics only with a port.
    otel_exporter: Literal["none", "console", "otlp"] = "none"
    otel_endpoint: str | None = None
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    metrics_host: str = "0.0.0.0"  # noqa: S104 - a scrape target must listen beyond loopback
    capture_content: bool = False  # message and fact text in spans: off unless explicitly on
    # HMAC key of the session and user stand-ins in spans (worker.telemetry_ids).
    telemetry_id_key: SecretStr | None = None
    queue_probe_interval_s: float = Field(default=5.0, gt=0)

    # Database pool.
    db_pool_min: int = Field(default=1, ge=0)
    db_pool_max: int = Field(default=10, ge=1)

    # The openai providers' calls (ignored by rules/hashing).
    # json_object is the fallback for servers without json_schema support.
    llm_structured_output: Literal["json_schema", "json_object"] = "json_schema"
    llm_timeout_s: float = Field(default=60.0, gt=0)
    llm_max_attempts: int = Field(default=4, ge=1, le=20)  # HTTP tries per call
    llm_answer_attempts: int = Field(default=2, ge=1, le=10)  # asks per schema-breaking answer
    llm_retry_after_cap_s: float = Field(default=30.0, ge=0)
    # The fleet's circuit breaker (worker.protection.breaker): open this long after a model
    # failure, doubling with each failure in a row, up to the max.
    llm_breaker_open_s: float = Field(default=2.0, gt=0)
    llm_breaker_max_s: float = Field(default=60.0, gt=0)
    # --- The fleet's model budget (worker.protection.budget), per endpoint, shared by every
    # replica through Redis. 0: no such limit; all three 0: no budget at all.
    llm_budget_rpm: int = Field(default=0, ge=0)  # requests per minute
    llm_budget_tpm: int = Field(default=0, ge=0)  # tokens per minute (estimated, then counted)
    llm_budget_concurrency: int = Field(default=0, ge=0)  # calls in flight at once
    # How long one call waits for budget before ProviderUnavailable (the job's retry applies).
    llm_budget_wait_max_s: float = Field(default=120.0, gt=0)
    # The window the rpm and tpm limits count in: a minute, as providers count;
    # tests shorten it so a run through several windows takes seconds.
    llm_budget_window_s: float = Field(default=60.0, gt=0)
    # --- end of the model budget.
    llm_temperature: float | None = Field(default=0.0, ge=0, le=2)  # None: not sent
    embed_timeout_s: float = Field(default=30.0, gt=0)
    # None: send `dimensions` only to models known to accept it (text-embedding-3*).
    embed_send_dimensions: bool | None = None

    @field_validator("database_url", "redis_url")
    @classmethod
    def _server_url_schemes(cls, url: str | None, info: ValidationInfo) -> str | None:
        # Refused here, so every command and the API say so in one line at start,
        # instead of the driver's error from deep inside the first connection.
        if not url:
            return None
        schemes = SERVER_URL_SCHEMES[info.field_name or ""]
        scheme = _scheme(url)
        if scheme.lower() not in schemes:
            # The scheme alone is quoted: the rest may hold a password.
            given = f"{scheme}://" if scheme else "no scheme"
            wanted = [f"{s}://" for s in schemes]
            raise ValueError(f"must start with {', '.join(wanted[:-1])} or {wanted[-1]}"
                             f" (got {given})")
        return url

    @model_validator(mode="before")
    @classmethod
    def _redis_url_is_the_first_shard(cls, data: Any) -> Any:
        # Every command that needs one Redis alone (preflight, embedded servers, eval)
        # keeps reading redis_url: with a shard map, that is its first shard.
        if not isinstance(data, dict) or not data.get("redis_shards"):
            return data
        entries = shard_entries(str(data["redis_shards"]))
        first = entries[0][1]
        if data.get("redis_url") and data["redis_url"] != first:
            raise ValueError("MEMFLEET_REDIS_URL and MEMFLEET_REDIS_SHARDS disagree: with a "
                             "shard map, leave MEMFLEET_REDIS_URL unset (it is the first "
                             "shard's URL)")
        return {**data, "redis_url": first}

    @model_validator(mode="after")
    def _check_shard_states(self) -> Settings:
        names = [name for name, _ in self.redis_shard_entries]
        pending = shard_names(self.redis_shards_pending, "PENDING")
        joining = shard_names(self.redis_shards_joining, "JOINING")
        for which, listed in (("PENDING", pending), ("JOINING", joining)):
            unknown = [name for name in listed if name not in names]
            if unknown:
                raise ValueError(f"MEMFLEET_REDIS_SHARDS_{which} names {unknown[0]!r}, which "
                                 "is not in MEMFLEET_REDIS_SHARDS")
        if pending and joining:
            raise ValueError("one shard change at a time: MEMFLEET_REDIS_SHARDS_PENDING and "
                             "MEMFLEET_REDIS_SHARDS_JOINING cannot both be set")
        if (pending or joining) and len(set(pending) | set(joining)) >= len(names):
            raise ValueError("at least one shard of MEMFLEET_REDIS_SHARDS must be neither "
                             "pending nor joining")
        return self

    @property
    def redis_shard_entries(self) -> tuple[tuple[str, str], ...]:
        """The shard map, (name, url) in order: MEMFLEET_REDIS_SHARDS, or the one shard
        ``default`` at MEMFLEET_REDIS_URL (empty while that is unresolved)."""
        if self.redis_shards:
            return shard_entries(self.redis_shards)
        return ((DEFAULT_SHARD, self.redis_url),) if self.redis_url else ()

    @model_validator(mode="before")
    @classmethod
    def _embeddings_default_to_the_chat_endpoint(cls, data: Any) -> Any:
        # Chat and embeddings often share one endpoint (OpenAI itself): with neither
        # MEMFLEET_EMBED_BASE_URL nor MEMFLEET_EMBED_API_KEY set, embeddings use the
        # chat endpoint's. Same provider kind, same server: never a different provider.
        if isinstance(data, dict) and not data.get("embed_base_url") and not data.get(
            "embed_api_key"
        ):
            data = {**data, "embed_base_url": data.get("llm_base_url"),
                    "embed_api_key": data.get("llm_api_key")}
        return data

    @model_validator(mode="after")
    def _check_providers(self) -> Settings:
        # Boot fails loudly; a missing endpoint never silently becomes the offline provider.
        missing = []
        if self.llm_provider == "openai" and not self.llm_base_url and not self.llm_api_key:
            missing.append("MEMFLEET_LLM_BASE_URL or MEMFLEET_LLM_API_KEY")
        if self.embed_provider == "openai" and not self.embed_base_url and not self.embed_api_key:
            missing.append("MEMFLEET_EMBED_BASE_URL or MEMFLEET_EMBED_API_KEY")
        if missing:
            raise ValueError(
                "the openai provider needs an endpoint or a key: set " + " and ".join(missing)
            )
        # user:password@ in a model URL would sit in every log line and span that names
        # the endpoint, and aiohttp refuses it beside the key's Authorization header.
        for name, url in (("LLM", self.llm_base_url), ("EMBED", self.embed_base_url)):
            if url and "@" in urlsplit(url).netloc:
                raise ValueError(f"MEMFLEET_{name}_BASE_URL must not carry credentials "
                                 f"(user:password@): set MEMFLEET_{name}_API_KEY instead")
        return self

    @model_validator(mode="after")
    def _check_byte_budgets(self) -> Settings:
        fault = byte_limits_fault(self.max_message_bytes, self.max_handover_bytes,
                                  self.max_session_bytes)
        if fault is not None:
            raise ValueError(fault)
        return self


def _scheme(url: str) -> str:
    """The URL's scheme, or "" when it has none (``host:port``, ``user:pw@host``: then
    the text before ``:`` is no scheme, and may be a user name)."""
    scheme, found, _ = url.partition("://")
    plain = scheme[:1].isascii() and scheme[:1].isalpha() and all(
        c.isascii() and (c.isalnum() or c in "+.-") for c in scheme)
    return scheme if found and plain else ""


def secret(value: SecretStr | None) -> str | None:
    """A secret setting's value, for the one call that needs it."""
    return None if value is None else value.get_secret_value()


def settings_error(exc: ValidationError) -> str:
    """One line that names each bad variable and what is wrong, never a value: a
    pydantic dump quotes the input, which holds every MEMFLEET_* secret."""
    problems = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        field = ".".join(str(part) for part in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        problems.append(f"MEMFLEET_{field.upper()}: {message}" if field else message)
    return "invalid settings: " + "; ".join(problems)
