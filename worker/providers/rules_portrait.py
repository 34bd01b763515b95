"""The offline ``rules`` provider's portrait (docs/portrait.md): the facts joined into
sentences, in the order given, deterministic, with nothing added.

The rules write facts without a subject ("Lives in Lisbon", "Name is Ada",
"Sister's name is Ana"); a portrait needs one: a fact that starts with a verb gets
"The user", one that starts with a thing gets "The user's", and a fact that already
names the user keeps its own. It only ever rewords the start of each fact, so a
portrait from these rules holds exactly the facts' claims: an updated fact shows
its new value only, since only active facts are given. Plain string work, linear in
the facts' length (no pattern: docs/architecture.md, "Work on user and model text").
"""

from __future__ import annotations

from worker.protection.cpu_budget import Checkpoint, CpuThreads, no_deadline, run_in_thread
from worker.providers.base import Answer, Usage
from worker.providers.rules import DEFAULT_CPU_BUDGET_S, MODEL, RULES_PROVIDER
from worker.providers.wire import MAX_PORTRAIT_CHARS, PortraitAnswer, PortraitRequest

# Subjects a fact may already open with (extraction's prompt asks for them).
_SUBJECTS = ("the user", "user's", "user ", "der nutzer", "el usuario", "l'utilisateur")
# First words that are verbs though they do not end in "s" as a third person does.
_VERBS = frozenset({"is", "no", "does", "did", "has", "had", "was", "moved", "can", "will",
                    "never", "always", "often", "usually", "recently", "used"})
# First words ending in "s" that are things, not verbs ("Parents live in Oslo").
_PLURALS = frozenset({"parents", "kids", "children's", "friends", "glasses", "siblings",
                      "cats", "dogs", "plans", "hobbies", "interests", "colleagues"})
SENTENCE_END = ".!?"


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def sentence_of(fact: str) -> str | None:
    """One fact as a sentence about the user; None for a blank one."""
    text = " ".join(fact.split()).rstrip(".!?;")
    if not text:
        return None
    folded = text.casefold()
    if folded.startswith(_SUBJECTS):
        said = text[:1].upper() + text[1:]
    else:
        first = folded.split(" ", 1)[0]
        verb = first in _VERBS or (first.endswith("s") and not first.endswith("'s")
                                   and len(first) > 3 and first not in _PLURALS)
        said = ("The user " if verb else "The user's ") + _lower_first(text)
    return said + "."


def _words(text: str) -> int:
    return len(text.split())


def write_portrait(request: PortraitRequest,
                   checkpoint: Checkpoint = no_deadline) -> PortraitAnswer:
    """The facts' sentences in order, while they fit in ``max_words`` (the first one
    always, cut at that many words if it alone is longer) and the wire's length."""
    sentences: list[str] = []
    words = 0
    for fact in request.facts:
        checkpoint()
        said = sentence_of(fact.text)
        if said is None:
            continue
        count = _words(said)
        if sentences and words + count > request.max_words:
            break
        if not sentences and count > request.max_words:
            said = " ".join(said.split()[:request.max_words]).rstrip(SENTENCE_END) + "."
            count = request.max_words
        sentences.append(said)
        words += count
    text = " ".join(sentences) or "The user."
    if len(text) > MAX_PORTRAIT_CHARS:
        text = text[:MAX_PORTRAIT_CHARS - 1].rsplit(" ", 1)[0] + "\u2026"
    return PortraitAnswer(portrait=text)


class RulesPortraitWriter:
    provider_name = RULES_PROVIDER
    model = MODEL

    def __init__(self, cpu_budget_s: float = DEFAULT_CPU_BUDGET_S,
                 threads: CpuThreads | None = None) -> None:
        self._budget_s, self._threads = cpu_budget_s, threads

    async def portrait(self, request: PortraitRequest) -> Answer[PortraitAnswer]:
        answer = await run_in_thread(lambda check: write_portrait(request, check),
                                     self._budget_s, self._threads)
        return Answer(answer, Usage(0, 0), MODEL)

    async def aclose(self) -> None:
        if self._threads is not None:
            self._threads.close()
