"""`memfleet eval --retrieval`'s haystack: ordinary facts added to each questioned user
before the search ranks their facts for a question.

A scenario leaves its user one to six facts, among which the right one is nearly
always first: that measures nothing. So, after the questions are answered (the
answers are never given these), each user gets the same DISTRACTORS, written by hand
through the store's manual add and embedded by the settings' embedder, as the memory
API's add does. They are about other things (no gold answer is among their words),
but many share a question's words ("city", "work", "uses", "likes", "game"), so
neither the words nor a poor embedder find the gold fact for free. The run's erase
takes them away with the rest.

Each is dated within the scenario's own span (its first turn to its end, evenly), as
the scenario's facts are, through the importer's store (which takes a fact's date):
the re-ranking's recency term (``--rerank``) then neither favours nor penalises them
for being written when the eval runs rather than when the scenario is set.
"""

from __future__ import annotations

from datetime import datetime

from worker.providers.base import Embedder
from worker.store.imports import ImportRow, ImportStore
from worker.store.types import FactTerms

DISTRACTORS: tuple[tuple[str, str], ...] = (
    ("Grew up in a small coastal town", "fact"),
    ("Visits the city library every Saturday", "preference"),
    ("Works out at the gym three times a week", "preference"),
    ("Likes long walks in the countryside", "preference"),
    ("Uses a paper planner for appointments", "preference"),
    ("Has a younger brother who studies law", "relationship"),
    ("Drinks green tea in the morning", "preference"),
    ("Is afraid of heights", "fact"),
    ("Reads science fiction novels", "preference"),
    ("Plays the piano on weekends", "preference"),
    ("Takes the train to the office", "fact"),
    ("Owns a bicycle with a basket", "fact"),
    ("Is saving money for a new kitchen", "fact"),
    ("Watches football with friends on Sundays", "preference"),
    ("Wears glasses for reading", "fact"),
    ("Bakes bread at home", "preference"),
    ("Keeps a vegetable garden on the balcony", "preference"),
    ("Volunteers at an animal shelter once a month", "fact"),
    ("Speaks a little Italian", "fact"),
    ("Dislikes loud restaurants", "preference"),
    ("Enjoys board games with friends", "preference"),
    ("Uses a standing desk at work", "preference"),
    ("Lived abroad for a year as a student", "fact"),
    ("Likes spicy food", "preference"),
    ("Prefers mornings for deep work", "preference"),
    ("Calls their grandmother every Sunday", "relationship"),
    ("Collects vinyl records", "preference"),
    ("Is learning to juggle", "fact"),
    ("Has a name day in autumn", "fact"),
    ("Moved flats twice in the past few years", "fact"),
)
IMPORTANCE = 5  # the middle of the scale (1 to 10)


def spread(first: datetime, last: datetime, count: int) -> list[datetime]:
    """``count`` moments evenly from ``first`` to ``last`` (both ends included; all
    ``last`` when there is one, or no span)."""
    if count < 2 or last <= first:
        return [last] * count
    step = (last - first) / (count - 1)
    return [first + step * i for i in range(count)]


async def add_distractors(store: ImportStore, embedder: Embedder, user_id: str, *,
                          span: tuple[datetime, datetime], memory_default: bool) -> int:
    """DISTRACTORS added to the user's facts as manual facts dated over ``span`` (one
    embeddings call, one transaction); how many were written."""
    vectors = (await embedder.embed([text for text, _ in DISTRACTORS])).value
    moments = spread(*span, len(DISTRACTORS))
    rows = [ImportRow(user_id, text, category, IMPORTANCE, moments[i],
                      FactTerms(confidence=1.0), import_key=f"eval-distractor-{i}")
            for i, (text, category) in enumerate(DISTRACTORS)]
    written = await store.write_user(user_id, rows, vectors, model=embedder.model,
                                     source_kind="manual", fences=await store.fences(),
                                     memory_default=memory_default)
    return written.imported
