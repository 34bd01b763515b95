"""The offline rules provider's notes (docs/notes.md): a small, safe rule set.

One shape only: a sentence in which the user says they are weighing something
("I'm thinking about a kitchen renovation, budget about $40k, timeline unclear",
"we're considering moving to Porto") becomes a third-person note of the whole
sentence, details included. Anything else gives no note: a model writes the
notes that need understanding. Patterns run on normalised sentences of at most
``MAX_SENTENCE_CHARS`` (worker.providers.rules), anchored, without nested
repetition, so each is one linear pass (tests/unit/repo/test_text_cpu.py).
"""

from __future__ import annotations

import re

from worker.providers.wire import (
    MAX_FACT_CHARS,
    MAX_NOTE_CHARS,
    ExtractedNote,
    NotePromotionAnswer,
    NotePromotionRequest,
    PromotedFact,
)

MAX_SENTENCE_CHARS = 600  # a longer sentence is cut at a word before it becomes a note
MAX_NOTES = 5  # per answer: the rest of a long slice's musings are left out

_WEIGHING = re.compile(
    r"^(?:(?:and|but|so|well|also|honestly|actually|hmm),? )?"
    r"(?:i'm|i am|we're|we are) (?:still |really |seriously )?"
    r"(?P<verb>thinking about|thinking of|considering|weighing|mulling over|"
    r"toying with the idea of) (?P<rest>.+)$",
    re.IGNORECASE,
)
# First-person words of the rest, said of the user: "my kitchen" is "their kitchen".
_FIRST_PERSON = re.compile(r"\b(?:i'm|we're|i|me|my|mine|myself|we|us|our|ours)\b",
                           re.IGNORECASE)
_THIRD_PERSON = {
    "i'm": "they're", "we're": "they're", "i": "they", "me": "them", "my": "their",
    "mine": "theirs", "myself": "themselves", "we": "they", "us": "them", "our": "their",
    "ours": "theirs",
}
# A rest that names nothing: "I'm thinking about it".
_NOTHING = frozenset({"it", "that", "this", "them", "those", "something", "stuff", "things",
                      "it all", "everything"})
_WRAPPING = " \t\"'`.,;:!-"


def _third_person(match: re.Match[str]) -> str:
    word = match.group(0)
    if word == "US":  # the country, not "us"
        return word
    return _THIRD_PERSON[word.casefold()]


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = text[: limit + 1]
    return (head.rsplit(" ", 1)[0] if " " in head else text[:limit]).rstrip(_WRAPPING)


def note_in(sentence: str) -> ExtractedNote | None:
    """The note a normalised sentence gives, or None. Questions give none."""
    sentence = _cut(sentence.strip(), MAX_SENTENCE_CHARS)
    if not sentence or sentence.endswith("?"):
        return None
    match = _WEIGHING.match(sentence)
    if match is None:
        return None
    rest = match.group("rest").strip(_WRAPPING)
    if not re.search(r"\w", rest) or rest.casefold() in _NOTHING:
        return None
    verb = match.group("verb").casefold()
    text = f"The user is {verb} {_FIRST_PERSON.sub(_third_person, rest)}."
    return ExtractedNote(text=_cut(text, MAX_NOTE_CHARS))


def promote(request: NotePromotionRequest) -> NotePromotionAnswer:
    """The rules' promotion: the newest note's text as the fact, deterministic (the
    notes agree, or the newest wins: the prompt's rule too). Notes of the rules read
    "The user is considering X."; kept so, a plan under consideration, category
    general, middling importance."""
    newest = request.notes[-1].text if request.notes else ""
    text = _cut(" ".join(newest.split()), MAX_FACT_CHARS) or "The user has a recurring note."
    return NotePromotionAnswer(fact=PromotedFact(text=text, category="general", importance=5))
