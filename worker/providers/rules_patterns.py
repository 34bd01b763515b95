"""The offline rules provider's sentence patterns and fact text shapes.

Both directions live here: ``RULES`` turn a user's first-person clause into a
third-person fact text, and ``parse_fact`` reads such a text back into a
``Slot``. Keeping them side by side is what lets the consolidator recognise the
extractor's own output (and the common "User lives in ..." phrasing of a model).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from worker.providers import rules_identity
from worker.providers.wire import MAX_FACT_CHARS, Category

RELATIONS = (
    "wife", "husband", "partner", "girlfriend", "boyfriend", "son", "daughter",
    "brother", "sister", "mother", "father", "friend", "manager", "boss", "dog", "cat",
)
MAX_VALUE_CHARS = 80

_REL = "|".join(sorted(RELATIONS, key=len, reverse=True))  # longest first: "boyfriend"
_FLAGS = re.IGNORECASE

# ---------------------------------------------------------------- values

# Words that trail a clause without belonging to the value: "I use Postgres now".
_TRAILING_FILLER = re.compile(
    r"\s+(?:now|currently|anymore|any\s+more|these\s+days|nowadays|too|as\s+well|"
    r"recently|lately|at\s+the\s+moment|right\s+now|for\s+now|instead|though|actually|"
    r"really|a\s+lot|very\s+much|so\s+much|lol|haha|yesterday|today|again|at\s+all|"
    r"for\s+(?:years|ages|a\s+while)|"
    r"(?:last|this)\s+(?:week|month|year)|a\s+while\s+ago|"
    r"(?:a\s+few|\d{1,4}|some)\s+(?:days|weeks|months|years)\s+ago)$",
    _FLAGS,
)
# The longest filler above, with its space, fits in this many final characters: the
# filler is looked for there only, so trimming many of them stays linear.
_FILLER_WINDOW = 24
_WRAPPING = " \t\"'`()[]{}<>.,;:!?-"
# A bare pronoun says nothing on its own: "I like it" is not a fact worth keeping.
_PRONOUNS = frozenset(
    {"it", "that", "this", "them", "those", "these", "him", "her", "you", "one", "so",
     "there", "what", "something", "everything", "nothing", "stuff"}
)
# "call me later" must not make the user's name "later".
_NOT_NAMES = frozenset(
    {"when", "if", "later", "tomorrow", "back", "at", "after", "before", "now", "soon",
     "tonight", "anytime", "whenever", "on", "in", "maybe", "please", "by", "a", "an",
     "the", "not", "just", "crazy", "old"}
)
# "my question is ..." is conversation, not a fact about the user.
_NOT_THINGS = frozenset(
    {"question", "problem", "issue", "point", "guess", "pleasure", "bad", "concern",
     "answer", "understanding", "mistake", "fault", "turn", "request", "reply",
     "response", "message", "apologies", "thought", "thoughts", "hope", "worry"}
)


def _truncate(value: str, limit: int = MAX_VALUE_CHARS) -> str:
    if len(value) <= limit:
        return value
    head = value[: limit + 1]
    cut = head.rsplit(" ", 1)[0] if " " in head else value[:limit]
    return cut[:limit].rstrip(_WRAPPING)


def clean_value(raw: str) -> str | None:
    """The user's value with fillers trimmed, or None when nothing meaningful is left."""
    value = " ".join(raw.split()).strip(_WRAPPING)
    while (filler := _TRAILING_FILLER.search(value, max(0, len(value) - _FILLER_WINDOW))):
        value = value[: filler.start()].strip(_WRAPPING)
    value = _truncate(value)
    if not re.search(r"\w", value) or value.casefold() in _PRONOUNS:
        return None
    return value


def _name_value(raw: str) -> str | None:
    value = clean_value(raw)
    if value is None or value.split()[0].casefold() in _NOT_NAMES:
        return None
    return " ".join(value.split()[:4])  # a name, not the rest of the sentence


def _capitalised_name(raw: str) -> str | None:
    # "my boss is Dana" names the boss; "my boss is nice" does not.
    value = _name_value(raw)
    return value if value is not None and value[0].isupper() else None


def _capitalise(word: str) -> str:
    return word[:1].upper() + word[1:]


# ---------------------------------------------------------------- extraction rules

Check = Literal["plain", "name", "capital", "intro", "job", "identity", "tool", "food"]
# Checks that judge the cleaned value by the word lists of ``rules_identity``.
_WORD_CHECKS = {
    "intro": rules_identity.intro_name, "job": rules_identity.job_title,
    "identity": rules_identity.identity, "tool": rules_identity.tool,
    "food": rules_identity.food,
}


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str]
    template: str  # formatted with the cleaned named groups
    category: Category
    importance: int
    check: Check = "plain"

    def render(self, match: re.Match[str]) -> str | None:
        fields: dict[str, str] = {}
        for group, raw in match.groupdict().items():
            value: str | None
            if group == "rel":
                value = _capitalise(raw.casefold())
            elif group == "thing":
                thing = " ".join(raw.split())
                value = None if thing.casefold() in _NOT_THINGS else _capitalise(thing)
            elif self.check == "name":
                value = _name_value(raw)
            elif self.check == "capital":
                value = _capitalised_name(raw)
            elif self.check in _WORD_CHECKS:
                cleaned = clean_value(raw)
                value = None if cleaned is None else _WORD_CHECKS[self.check](cleaned)
            else:
                value = clean_value(raw)
            if value is None:
                return None
            fields[group] = value
        if "old" in fields and fields["old"].casefold() == fields["new"].casefold():
            return None
        # Bounded by its parts already; the wire's limit is kept whatever the template.
        return _truncate(self.template.format(**fields), MAX_FACT_CHARS)


_ADV = (
    r"(?:\s+(?:just|recently|now|currently|also|actually|really|still|mostly|mainly|"
    r"usually|generally|finally|already|primarily|totally|absolutely))?"
)
_I = r"\bi" + _ADV
_IW = r"\b(?:i|we)" + _ADV
_IW_HAVE = r"\b(?:i|we)(?:'ve|\s+have)?" + _ADV
_I_HAVE = r"\bi(?:'ve|\s+have)?" + _ADV
_IM = r"\b(?:i'm|i\s+am|im)" + _ADV
_IM_WE = r"\b(?:i'm|i\s+am|im|we're|we\s+are)" + _ADV
_NOT = r"\s+(?:don't|do\s+not|dont)"
_V = r"\s+(?P<v>.+)"
_ANY_MORE = r"\s+any\s*(?:more|longer)$"
# A value that stops before a place or a time: "I work with Rust at my job" -> "Rust".
_V_UNTIL_PREP = r"\s+(?P<v>.+?)(?:\s+(?:at|for|in|on|from|since|every|with)\s.*)?$"
# Claims about who the user is start the clause: "my sister thinks I'm vegan" is not one.
_START = (r"^(?:(?:hi|hello|hey|hiya|well|oh|so|and|but|also|ok|okay|actually|yes|yeah|now)"
          r"(?:\s+there)?\s+)?")
_IM_START = _START + r"(?:i'm|i\s+am|im)"
# The diets and identities of rules_identity, longest first ("lacto-vegetarian").
_IDENTITY = "|".join(re.escape(word).replace(r"\ ", r"\s")
                     for word in sorted(rules_identity.IDENTITIES, key=len, reverse=True))
_IS_IDENTITY = rf"(?P<v>{_IDENTITY})(?![\w-])"
# A name's word: a capital first letter, whatever the flags (rules_identity judges the rest).
_NAME_WORD = r"(?-i:[A-ZÀ-ÖØ-Þ])[\w'-]{1,39}"


def _rule(
    pattern: str, template: str, category: Category, importance: int, check: Check = "plain"
) -> Rule:
    return Rule(re.compile(pattern, _FLAGS), template, category, importance, check)


# Order matters: the first rule whose pattern matches a clause decides it, so
# the narrower phrasings ("no longer use", "don't like") come before "use", "like".
RULES: tuple[Rule, ...] = (
    # Negations and changes first: "I'm not vegan any more" before "I'm vegan".
    _rule(_IM + r"\s+no\s+longer(?:\s+an?)?\s+" + _IS_IDENTITY, "Is no longer {v}", "fact", 8,
          "identity"),
    _rule(_IM + r"\s+not(?:\s+an?)?\s+" + _IS_IDENTITY + _ANY_MORE, "Is no longer {v}", "fact",
          8, "identity"),
    _rule(_I_HAVE + r"\s+(?:stopped|quit)\s+being(?:\s+an?)?\s+" + _IS_IDENTITY,
          "Is no longer {v}", "fact", 8, "identity"),
    _rule(_IM + r"\s+not(?:\s+an?)?\s+" + _IS_IDENTITY, "Is not {v}", "fact", 8, "identity"),
    _rule(_IM + r"\s+no\s+longer\s+allergic\s+to" + _V, "Is no longer allergic to {v}", "fact", 9),
    _rule(_IM + r"\s+not\s+allergic\s+to" + _V, "Is not allergic to {v}", "fact", 9),
    _rule(_I + r"\s+no\s+longer\s+live\s+in" + _V, "No longer lives in {v}", "fact", 8),
    _rule(_I + _NOT + r"\s+live\s+in\s+(?P<v>.+?)" + _ANY_MORE, "No longer lives in {v}",
          "fact", 8),
    _rule(_I_HAVE + r"\s+moved\s+(?:away\s+from|out\s+of)" + _V, "No longer lives in {v}",
          "fact", 8),
    _rule(_I + r"\s+no\s+longer\s+work\s+with" + _V, "No longer works with {v}", "decision",
          6, "tool"),
    _rule(_IM + r"\s+no\s+longer\s+working\s+with" + _V, "No longer works with {v}",
          "decision", 6, "tool"),
    _rule(_I_HAVE + r"\s+(?:stopped|quit)\s+working\s+with" + _V, "No longer works with {v}",
          "decision", 6, "tool"),
    _rule(_I + _NOT + r"\s+work\s+with\s+(?P<v>.+?)" + _ANY_MORE, "No longer works with {v}",
          "decision", 6, "tool"),
    _rule(_I + r"\s+no\s+longer\s+work\s+(?:at|for)" + _V, "No longer works at {v}", "fact", 7),
    _rule(_IM + r"\s+no\s+longer\s+working\s+(?:at|for)" + _V, "No longer works at {v}",
          "fact", 7),
    _rule(_I_HAVE + r"\s+(?:stopped|quit)\s+working\s+(?:at|for)" + _V,
          "No longer works at {v}", "fact", 7),
    _rule(_I + _NOT + r"\s+work\s+(?:at|for)\s+(?P<v>.+?)" + _ANY_MORE,
          "No longer works at {v}", "fact", 7),
    _rule(_I_HAVE + r"\s+(?:quit|left)\s+my\s+(?:job|position|role)\s+(?:at|with)" + _V,
          "No longer works at {v}", "fact", 7),
    _rule(_I + r"\s+no\s+longer\s+work\s+as(?:\s+an?)?" + _V, "No longer works as {v}",
          "fact", 7),
    _rule(_IM + r"\s+no\s+longer\s+an?" + _V, "No longer works as {v}", "fact", 7, "job"),
    _rule(_IM + r"\s+not\s+an?\s+(?P<v>.+?)" + _ANY_MORE, "No longer works as {v}", "fact", 7,
          "job"),
    _rule(_I + _NOT + r"\s+eat" + _V, "Does not eat {v}", "fact", 7, "food"),
    _rule(_I + r"\s+no\s+longer\s+eat" + _V, "Does not eat {v}", "fact", 7, "food"),
    _rule(_I_HAVE + r"\s+(?:stopped|quit)\s+eating" + _V, "Does not eat {v}", "fact", 7, "food"),
    _rule(_I + r"\s+eat\s+(?P<v>.+?)\s+again$", "Eats {v}", "fact", 7, "food"),
    _rule(_I_HAVE + r"\s+(?:started|begun)\s+eating" + _V, "Eats {v}", "fact", 7, "food"),
    _rule(_IW_HAVE + r"\s+(?:moved|relocated)\s+from\s+(?P<old>.+?)\s+to\s+(?P<new>.+)",
          "Moved from {old} to {new}", "fact", 7),
    _rule(_IW + r"\s+no\s+longer\s+use" + _V, "No longer uses {v}", "decision", 6),
    _rule(_IM_WE + r"\s+no\s+longer\s+using" + _V, "No longer uses {v}", "decision", 6),
    _rule(_IW_HAVE + r"\s+(?:stopped|quit)\s+using" + _V, "No longer uses {v}", "decision", 6),
    _rule(_IW + _NOT + r"\s+use\s+(?P<v>.+?)\s+any\s*more$", "No longer uses {v}",
          "decision", 6),
    _rule(r"\bwe(?:'ve|\s+have)?\s+dropped" + _V, "No longer uses {v}", "decision", 6),
    _rule(_IW_HAVE + r"\s+(?:switched|migrated)\s+from\s+(?P<old>.+?)\s+to\s+(?P<new>.+)",
          "Uses {new} instead of {old}", "decision", 7),
    _rule(_IW_HAVE + r"\s+(?:switched|migrated)(?:\s+over)?\s+to" + _V, "Uses {v}", "decision", 6),
    _rule(_I + r"\s+live\s+in" + _V, "Lives in {v}", "fact", 8),
    _rule(_IM + r"\s+(?:based|living)\s+in" + _V, "Lives in {v}", "fact", 8),
    _rule(_I_HAVE + r"\s+(?:moved|relocated)(?:\s+back)?\s+to" + _V, "Lives in {v}", "fact", 8),
    _rule(_I + r"\s+work\s+as(?:\s+an?)?" + _V, "Works as {v}", "fact", 7),
    _rule(_IM + r"\s+an?\s+(?P<v>.+?)\s+by\s+(?:profession|trade)$", "Works as {v}", "fact", 7),
    _rule(_I + r"\s+work\s+(?:at|for)" + _V, "Works at {v}", "fact", 7),
    _rule(_IM + r"\s+working\s+(?:at|for)" + _V, "Works at {v}", "fact", 7),
    _rule(_IM + r"\s+working\s+as(?:\s+an?)?" + _V, "Works as {v}", "fact", 7),
    _rule(_I + r"\s+work\s+with" + _V_UNTIL_PREP, "Works with {v}", "preference", 6, "tool"),
    _rule(_IM + r"\s+working\s+with" + _V_UNTIL_PREP, "Works with {v}", "preference", 6,
          "tool"),
    _rule(_IW_HAVE + r"\s+been\s+using" + _V, "Uses {v}", "preference", 6),
    _rule(_IW + r"\s+use" + _V, "Uses {v}", "preference", 6),
    _rule(_IM_WE + r"\s+using" + _V, "Uses {v}", "preference", 6),
    _rule(_I + r"\s+prefer" + _V, "Prefers {v}", "preference", 6),
    _rule(_I + _NOT + r"\s+(?:like|love|enjoy)" + _V, "Dislikes {v}", "preference", 5),
    _rule(_I + r"\s+(?:hate|dislike|detest|can't\s+stand|cannot\s+stand)" + _V, "Dislikes {v}",
          "preference", 5),
    _rule(_I + r"\s+(?:like|love|enjoy)" + _V, "Likes {v}", "preference", 5),
    _rule(_IM + r"\s+allergic\s+to" + _V, "Is allergic to {v}", "fact", 9),
    _rule(_IM + r"\s+learning" + _V, "Is learning {v}", "fact", 5),
    _rule(r"\bmy\s+name(?:\s+is|'s)" + _V, "Name is {v}", "fact", 9, "name"),
    _rule(_IM + r"\s+called" + _V, "Name is {v}", "fact", 9, "name"),
    _rule(r"\bcall\s+me" + _V, "Name is {v}", "fact", 9, "name"),
    _rule(rf"\bmy\s+(?P<rel>{_REL})(?:'s\s+name\s+is|\s+is\s+(?:named|called))" + _V,
          "{rel}'s name is {v}", "relationship", 7, "name"),
    _rule(rf"\bmy\s+(?P<rel>{_REL})\s+is" + _V, "{rel}'s name is {v}", "relationship", 7,
          "capital"),
    # Words of a thing are bounded: "my <a 30,000-letter word> is" names no thing.
    _rule(r"\bmy\s+(?P<thing>[^\W\d_][\w'-]{0,39}(?:\s+[^\W\d_][\w'-]{0,39}){0,3}?)\s+is"
          + _V,
          "{thing} is {v}", "fact", 5),
    # Who the user is, at the start of a clause only, judged by rules_identity's lists.
    _rule(_IM_START + r"(?:\s+(?:now|also|still|actually|fully|strictly|completely))?"
          r"(?:\s+an?)?(?:\s+strict)?\s+" + _IS_IDENTITY, "Is {v}", "fact", 8, "identity"),
    _rule(_IM_START + _ADV + r"\s+an?" + _V_UNTIL_PREP, "Works as {v}", "fact", 7, "job"),
    _rule(_START + r"(?:i'm|i\s+am)\s+(?P<v>" + _NAME_WORD + r"(?:\s+" + _NAME_WORD
          + r"){0,2})(?:\s+(?:here|from\s.{1,80}))?$", "Name is {v}", "fact", 9, "intro"),
)

# ---------------------------------------------------------------- reading facts back

SlotKind = Literal["single", "uses", "switch", "stopped", "likes", "dislikes", "eats",
                   "avoids", "move", "ended", "other"]


@dataclass(frozen=True, slots=True)
class Slot:
    """What a fact text claims. ``single`` slots hold one value per ``key``; an ``ended``
    slot's value is the fact it ends ("No longer lives in Oslo": "Lives in Oslo"); a
    ``move`` is "Moved from A to B", of a place or a tool, which only neighbours tell."""

    kind: SlotKind
    key: str = ""
    value: str = ""
    old: str = ""  # the replaced tool, for "Uses B instead of A"; A of a move


_SUBJECT = re.compile(r"^(?:the\s+)?user(?:'s)?\s+", _FLAGS)
_THING_OWNER = re.compile(r"^(?:the|my|his|her|their|user's)\s+", _FLAGS)


def _parser(pattern: str, kind: SlotKind, key: str = "") -> tuple[re.Pattern[str], SlotKind, str]:
    return re.compile(pattern, _FLAGS), kind, key


# Tried in order against a fact text with any "User"/"The user's" subject removed.
_PARSERS: tuple[tuple[re.Pattern[str], SlotKind, str], ...] = (
    _parser(r"^uses\s+(?P<v>.+?)\s+instead\s+of\s+(?P<old>.+)$", "switch"),
    _parser(r"^no\s+longer\s+(?:uses|works\s+with)\s+(?P<v>.+)$", "stopped"),
    _parser(r"^no\s+longer\s+(?P<pos>lives\s+in|works\s+(?:at|for|as))\s+(?P<v>.+)$", "ended"),
    _parser(r"^is\s+(?:no\s+longer|not)\s+(?P<v>.+)$", "ended", "is"),
    _parser(r"^uses\s+(?P<v>.+)$", "uses"),
    _parser(r"^works\s+with\s+(?P<v>.+)$", "uses", "works with"),
    _parser(r"^moved\s+from\s+(?P<old>.+?)\s+to\s+(?P<v>.+)$", "move"),
    _parser(rf"^is\s+(?P<v>{'|'.join(map(re.escape, rules_identity.DIETS))})$", "single", "diet"),
    _parser(r"^(?:does\s+not|doesn't)\s+eat\s+(?P<v>.+)$", "avoids"),
    _parser(r"^eats\s+(?P<v>.+)$", "eats"),
    _parser(r"^lives\s+in\s+(?P<v>.+)$", "single", "lives in"),
    _parser(r"^works\s+(?:at|for)\s+(?P<v>.+)$", "single", "works at"),
    _parser(r"^works\s+as\s+(?:an?\s+)?(?P<v>.+)$", "single", "works as"),
    _parser(r"^dislikes\s+(?P<v>.+)$", "dislikes"),
    _parser(r"^likes\s+(?P<v>.+)$", "likes"),
    # Many-valued facts: one may prefer, be allergic to, or learn several things.
    _parser(r"^(?:prefers|is\s+allergic\s+to|is\s+learning)\s+.+$", "other"),
    _parser(rf"^has\s+an?\s+(?P<rel>{_REL})\s+named\s+(?P<v>.+)$", "single", "relation"),
    _parser(rf"^(?P<rel>{_REL})(?:'s)?\s+name\s+is\s+(?P<v>.+)$", "single", "relation"),
    _parser(r"^(?P<thing>[^\W\d_][\w'-]*(?:\s+[^\W\d_][\w'-]*){0,3}?)\s+is\s+(?P<v>.+)$",
            "single", "thing"),
)


def clean_text(text: str) -> str:
    """A fact text with curly quotes, runs of spaces and the final full stop evened out."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u02bc", "'")
    return " ".join(text.split()).rstrip(". ")


@lru_cache(maxsize=65536)
def norm(text: str) -> str:
    """Case-, space- and punctuation-blind form for comparing texts and values."""
    return " ".join(re.sub(r"[^\w\s]", "", text.casefold()).split())


@lru_cache(maxsize=65536)  # pure, and the same neighbour texts come back every candidate
def parse_fact(text: str) -> Slot:
    """Read a fact text back into the slot it fills; ``other`` when no shape fits."""
    body = _SUBJECT.sub("", clean_text(text), count=1)
    for pattern, kind, key in _PARSERS:
        match = pattern.match(body)
        if match is None:
            continue
        groups = match.groupdict()
        if kind == "ended":  # the fact it ends, in the extractor's words
            return Slot(kind, value=_capitalise(f"{groups.get('pos') or key} {groups['v']}"))
        if key == "relation":
            key = "relation:" + groups["rel"].casefold()
        elif key == "thing":
            key = "thing:" + norm(_THING_OWNER.sub("", groups["thing"]))
        # Shapes without a value group compare by their whole text.
        return Slot(kind, key, groups.get("v") or body, groups.get("old") or "")
    return Slot("other", value=body)
