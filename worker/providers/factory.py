"""Build the providers the settings name. Fails loudly; never swaps one for another."""

from __future__ import annotations

from worker.config import Settings
from worker.errors import ConfigurationError
from worker.providers.base import Providers
from worker.providers.hashing import HashingEmbedder
from worker.providers.rules import RulesConsolidator, RulesExtractor, RulesSummarizer


def build_providers(settings: Settings) -> Providers:
    if settings.llm_provider != "rules" or settings.embed_provider != "hashing":
        raise ConfigurationError(
            "the openai providers are not built yet in this version: use"
            " MEMFLEET_LLM_PROVIDER=rules and MEMFLEET_EMBED_PROVIDER=hashing"
        )
    return Providers(
        extractor=RulesExtractor(),
        consolidator=RulesConsolidator(),
        summarizer=RulesSummarizer(),
        embedder=HashingEmbedder(settings.embed_dim),
    )
