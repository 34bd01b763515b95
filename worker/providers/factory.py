"""Build the providers the settings name. Fails loudly; never swaps one for another.

Chat and embeddings are chosen separately (openai chat with hashing embeddings
is a valid mix). Endpoints and keys are passed explicitly so the openai library
never picks up OPENAI_* variables behind the settings' back.

The fleet's model budget (worker.protection.budget) needs the worker's Redis: given one
and a limit set, each endpoint (base URL) gets one budget that its chat and
embeddings calls share. Without Redis, or with every limit at 0, calls are
unmetered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from worker.config import Settings, secret
from worker.errors import ConfigurationError
from worker.protection.budget import (
    WINDOW_MARGIN_S,
    BudgetKeys,
    BudgetLimits,
    ModelBudget,
    RedisBudget,
)
from worker.protection.cpu_budget import CpuThreads
from worker.protection.retry import RetryPolicy
from worker.providers.base import (
    Consolidator,
    Embedder,
    Extractor,
    NotePromoter,
    PortraitWriter,
    Providers,
    Summarizer,
)
from worker.providers.hashing import HashingEmbedder
from worker.providers.http_client import Clients
from worker.providers.openai_chat import (
    ChatOptions,
    OpenAIConsolidator,
    OpenAIExtractor,
    OpenAINotePromoter,
    OpenAIPortraitWriter,
    OpenAISummarizer,
)
from worker.providers.openai_embed import EmbedOptions, OpenAIEmbedder
from worker.providers.rules import (
    RulesConsolidator,
    RulesExtractor,
    RulesNotePromoter,
    RulesSummarizer,
)
from worker.providers.rules_portrait import RulesPortraitWriter

if TYPE_CHECKING:
    from worker.metrics import Metrics

OPENAI_BASE_URL = "https://api.openai.com/v1"
# Local servers (vLLM, llama.cpp, Ollama) ignore the key, but the client insists on one.
PLACEHOLDER_KEY = "memfleet-no-key"


def endpoint(base_url: str | None, api_key: str | None, prefix: str) -> tuple[str, str]:
    """The (base URL, key) to use; ``prefix`` names the variables in the error."""
    if not base_url and not api_key:
        raise ConfigurationError(
            f"the openai provider needs {prefix}_BASE_URL (a local server) or {prefix}_API_KEY"
        )
    if not base_url:
        return OPENAI_BASE_URL, api_key or ""
    return base_url, api_key or PLACEHOLDER_KEY


FailureHook = Callable[[str], None]


def budget_limits(settings: Settings) -> BudgetLimits:
    return BudgetLimits(
        rpm=settings.llm_budget_rpm,
        tpm=settings.llm_budget_tpm,
        concurrency=settings.llm_budget_concurrency,
        wait_max_s=settings.llm_budget_wait_max_s,
        window_s=settings.llm_budget_window_s + WINDOW_MARGIN_S,
        # A lease only comes back by expiry when its worker died; a live call must
        # never outlast it, and the client's timeout bounds each phase of a request,
        # not the whole: twice the longer timeout.
        lease_s=2 * max(settings.llm_timeout_s, settings.embed_timeout_s),
    )


class _Budgets:
    """One budget per endpoint base URL, built on first use."""

    def __init__(self, settings: Settings, redis: Any, metrics: Metrics | None) -> None:
        self._settings, self._redis, self._metrics = settings, redis, metrics
        self._limits = budget_limits(settings)
        self._built: dict[str, ModelBudget] = {}

    def of(self, base_url: str) -> ModelBudget | None:
        if self._redis is None or self._limits.unlimited:
            return None
        if base_url not in self._built:
            on_wait = on_pause = None
            metrics = self._metrics
            if metrics is not None:

                def on_wait(waited_s: float, reason: str | None) -> None:
                    metrics.budget_wait.record(waited_s)
                    if reason is not None:
                        metrics.budget_waits.add(1, {"reason": reason})

                def on_pause() -> None:
                    metrics.budget_pauses.add(1)

            self._built[base_url] = RedisBudget(
                self._redis, BudgetKeys.of(self._settings.queue_name, base_url), self._limits,
                on_wait=on_wait, on_pause=on_pause,
            )
        return self._built[base_url]


def _retry(
    settings: Settings, on_failure: FailureHook | None, budget: ModelBudget | None = None
) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=settings.llm_max_attempts,
        retry_after_cap_s=settings.llm_retry_after_cap_s,
        on_failure=on_failure,
        budget=budget,
    )


def chat_options(
    settings: Settings, model: str, what: str, on_failure: FailureHook | None = None,
    budgets: _Budgets | None = None,
) -> ChatOptions:
    if not model.strip():
        raise ConfigurationError(f"the openai provider needs a model name for {what}")
    base_url, api_key = endpoint(settings.llm_base_url, secret(settings.llm_api_key),
                                 "MEMFLEET_LLM")
    return ChatOptions(
        base_url=base_url,
        api_key=api_key,
        model=model,
        structured_output=settings.llm_structured_output,
        timeout_s=settings.llm_timeout_s,
        answer_attempts=settings.llm_answer_attempts,
        temperature=settings.llm_temperature,
        retry=_retry(settings, on_failure, budgets.of(base_url) if budgets else None),
    )


def _embed_options(
    settings: Settings, on_failure: FailureHook | None = None, budgets: _Budgets | None = None,
    *, model: str | None = None, dim: int | None = None,
) -> EmbedOptions:
    """The settings' embeddings options, or those of ``model`` at ``dim`` on the same endpoint."""
    model = settings.embed_model if model is None else model
    if not model.strip():
        raise ConfigurationError("the openai embeddings provider needs MEMFLEET_EMBED_MODEL")
    base_url, api_key = endpoint(
        settings.embed_base_url, secret(settings.embed_api_key), "MEMFLEET_EMBED"
    )
    return EmbedOptions(
        base_url=base_url,
        api_key=api_key,
        model=model,
        dim=settings.embed_dim if dim is None else dim,
        send_dimensions=settings.embed_send_dimensions,
        timeout_s=settings.embed_timeout_s,
        retry=_retry(settings, on_failure, budgets.of(base_url) if budgets else None),
    )


EMBED_PROVIDERS = ("hashing", "openai", "local")


def embedding_model(settings: Settings) -> str:
    """The model name the settings' embedder writes on its rows."""
    if settings.embed_provider == "hashing":
        return HashingEmbedder(settings.embed_dim).model
    if settings.embed_provider == "local":
        from worker.providers.local_embed import MODEL as LOCAL_MODEL

        return LOCAL_MODEL
    return settings.embed_model


def _local_embedder(dim: int) -> Embedder:
    # Imported here: numpy's model and its readers only for those who chose it.
    from worker.providers.local_embed import LocalEmbedder

    return LocalEmbedder(dim)


def _embedder_factory(
    settings: Settings, on_failure: FailureHook | None, budgets: _Budgets
) -> Callable[[str, int], Embedder]:
    def build(model: str, dim: int) -> Embedder:
        if dim < 1:
            raise ConfigurationError(f"the embedding dimension must be positive, got {dim}")
        if settings.embed_provider == "hashing":
            # One function whatever the name: the name only labels the rows.
            return HashingEmbedder(dim, model)
        if settings.embed_provider == "local":
            if model != embedding_model(settings):
                raise ConfigurationError(f"the local embeddings provider only embeds with "
                                         f"{embedding_model(settings)}, not {model}")
            return _local_embedder(dim)
        return OpenAIEmbedder(_embed_options(settings, on_failure, budgets, model=model,
                                             dim=dim))

    return build


def build_embedder(
    settings: Settings, model: str, dim: int, *, redis: Any = None,
    metrics: Metrics | None = None,
) -> Embedder:
    """An embedder of ``model`` at ``dim`` from the settings' provider, endpoint and key,
    its calls within the fleet's model budget (``redis``) like the workers' calls."""
    if settings.embed_provider not in EMBED_PROVIDERS:
        raise ConfigurationError(f"unknown MEMFLEET_EMBED_PROVIDER {settings.embed_provider!r}")
    return _embedder_factory(settings, None, _Budgets(settings, redis, metrics))(model, dim)


def _endpoint_of(options: ChatOptions | EmbedOptions) -> tuple[str, str, float]:
    return options.base_url, options.api_key, options.timeout_s


def build_providers(
    settings: Settings, *, on_failure: FailureHook | None = None, redis: Any = None,
    metrics: Metrics | None = None,
) -> Providers:
    """``on_failure`` is told the kind of every failed model call (for metrics);
    ``redis`` carries the fleet's model budget, ``metrics`` records its waits."""
    if settings.llm_provider not in ("rules", "openai"):  # only if built without validation
        raise ConfigurationError(f"unknown MEMFLEET_LLM_PROVIDER {settings.llm_provider!r}")
    if settings.embed_provider not in EMBED_PROVIDERS:
        raise ConfigurationError(f"unknown MEMFLEET_EMBED_PROVIDER {settings.embed_provider!r}")
    # Every option is checked before any client exists, so a bad setting leaks no client.
    budgets = _Budgets(settings, redis, metrics)
    chat: tuple[ChatOptions, ChatOptions, ChatOptions, ChatOptions] | None = None
    if settings.llm_provider == "openai":
        chat = (
            chat_options(settings, settings.extract_model, "extraction", on_failure, budgets),
            chat_options(settings, settings.consolidate_model, "consolidation", on_failure,
                          budgets),
            chat_options(
                settings, settings.summary_model or settings.extract_model, "summaries",
                on_failure, budgets,
            ),
            # The portrait's calls share the endpoint's budget with the job's (docs/portrait.md).
            chat_options(settings, portrait_model(settings), "portraits", on_failure, budgets),
        )
    embed = (_embed_options(settings, on_failure, budgets)
             if settings.embed_provider == "openai" else None)

    extractor: Extractor
    consolidator: Consolidator
    summarizer: Summarizer
    portrait_writer: PortraitWriter
    # One client per endpoint: the calls of a job share its pooled connections.
    clients = Clients()
    if chat is None:
        budget_s, threads = settings.provider_cpu_budget_s, CpuThreads()
        extractor, consolidator, summarizer = (
            RulesExtractor(budget_s, threads), RulesConsolidator(budget_s, threads),
            RulesSummarizer(budget_s, threads),
        )
        portrait_writer = RulesPortraitWriter(budget_s, threads)
    else:
        extractor = OpenAIExtractor(chat[0], client=clients.of(*_endpoint_of(chat[0])))
        consolidator = OpenAIConsolidator(chat[1], client=clients.of(*_endpoint_of(chat[1])))
        summarizer = OpenAISummarizer(chat[2], client=clients.of(*_endpoint_of(chat[2])))
        portrait_writer = OpenAIPortraitWriter(chat[3],
                                               client=clients.of(*_endpoint_of(chat[3])))
    embedder: Embedder
    if embed is not None:
        embedder = OpenAIEmbedder(embed, client=clients.of(*_endpoint_of(embed)))
    elif settings.embed_provider == "local":
        embedder = _local_embedder(settings.embed_dim)
    else:
        embedder = HashingEmbedder(settings.embed_dim)
    return Providers(extractor, consolidator, summarizer, embedder,
                     _embedder_factory(settings, on_failure, budgets),
                     portrait_writer=portrait_writer)


def portrait_model(settings: Settings) -> str:
    """The portrait pass's model: MEMFLEET_PORTRAIT_MODEL, else the summaries'."""
    return settings.portrait_model or settings.summary_model or settings.extract_model


def build_note_promoter(
    settings: Settings, *, on_failure: FailureHook | None = None, redis: Any = None,
    metrics: Metrics | None = None,
) -> NotePromoter:
    """The notes' promotion pass (docs/notes.md) on the settings' chat provider: the
    extraction model, within the fleet's model budget (``redis``); the rules provider's
    deterministic promotion offline."""
    if settings.llm_provider == "rules":
        return RulesNotePromoter(settings.provider_cpu_budget_s)
    if settings.llm_provider != "openai":
        raise ConfigurationError(f"unknown MEMFLEET_LLM_PROVIDER {settings.llm_provider!r}")
    options = chat_options(settings, settings.extract_model, "the notes' promotion",
                           on_failure, _Budgets(settings, redis, metrics))
    return OpenAINotePromoter(options)
