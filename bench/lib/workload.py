"""The bench's synthetic users and sessions, as conversations the workers process.

Every user is seeded by sessions of two user turns holding twenty statements,
``SEEDED_FACTS`` in all, in shapes the offline rules extractor turns into one
fact each (all ADDs). Every measured session first has a short small-talk
history processed (1 to 10 user turns: it leaves the cursor, and the summary
counter, where a real session would), then a new slice of five user turns
holding ten statements that the rules extractor turns into ten candidates with
a fixed mix of outcomes:

    5 UPDATE  moved to a city, work at a company, two favourite things, one tool switch
    2 DELETE  "I stopped using X" for two tools the user has
    2 ADD     a language being learned, a new hobby
    1 NONE    a hobby the user already has, said again

ADDs and DELETEs balance, so a user keeps 200 active facts however many of its
sessions run. Each of a user's sessions touches its own tools and hobbies, so
the outcome does not depend on the order a worker runs them in; the chained
slots (city, employer, favourites) supersede whichever row is current. The
memory_run rows check that the workers saw it that way.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import product

SEEDED_FACTS = 200
CANDIDATES_PER_JOB = 10
EXPECTED_MIX = {"added": 2, "updated": 5, "deleted": 2, "unchanged": 1}
SEED_FACTS_PER_JOB = 20  # the most candidates the worker takes from one slice
MAX_HISTORY_TURNS = 10  # = summary_every_user_turns: about half the slices make it due

_CITIES = (
    "Lisbon", "Porto", "Berlin", "Munich", "Vienna", "Zurich", "Geneva", "Lyon", "Paris",
    "Madrid", "Seville", "Valencia", "Milan", "Turin", "Rome", "Naples", "Athens", "Sofia",
    "Prague", "Krakow", "Warsaw", "Gdansk", "Riga", "Tallinn", "Helsinki", "Oslo", "Bergen",
    "Stockholm", "Malmo", "Copenhagen", "Aarhus", "Hamburg", "Bremen", "Amsterdam", "Utrecht",
    "Rotterdam", "Antwerp", "Ghent", "Brussels", "Dublin", "Cork", "Galway", "Edinburgh",
    "Glasgow", "Leeds", "Bristol", "Cardiff", "Montreal", "Toronto", "Boston", "Denver",
    "Austin", "Seattle", "Portland", "Chicago", "Kyoto", "Osaka", "Seoul", "Taipei", "Melbourne",
)
_HOBBIES = (
    "bouldering", "trail running", "road cycling", "sea kayaking", "open water swimming",
    "bird watching", "wild camping", "rock climbing", "cross country skiing", "snowboarding",
    "surfing", "sailing", "scuba diving", "archery", "fencing", "table tennis", "badminton",
    "yoga", "pilates", "chess", "go", "crossword puzzles", "jigsaw puzzles", "board games",
    "tabletop roleplaying", "woodworking", "pottery", "knitting", "embroidery", "calligraphy",
    "watercolour painting", "oil painting", "film photography", "street photography",
    "astronomy", "gardening", "beekeeping", "baking sourdough", "home brewing", "fermenting",
    "jazz piano", "classical guitar", "choir singing", "salsa dancing", "tango", "poetry",
    "sci-fi novels", "graphic novels", "history podcasts", "true crime podcasts",
    "Korean food", "Thai curries", "Sichuan cooking", "Ethiopian food", "Neapolitan pizza",
    "ramen", "dim sum", "tapas", "sushi", "falafel", "dark chocolate", "green tea",
    "filter coffee", "natural wine", "craft beer", "kombucha", "spicy food", "long walks",
    "old cathedrals", "modern architecture", "museums", "flea markets", "vinyl records",
    "synth music", "techno", "opera", "musicals", "stand-up comedy", "documentaries",
    "anime", "retro video games", "speedrunning", "model trains", "origami", "geocaching",
)
_LANGUAGES = (
    "Rust", "Go", "Haskell", "OCaml", "Elixir", "Erlang", "Clojure", "Scala", "Kotlin",
    "Swift", "Zig", "Nim", "Julia", "Lua", "Racket", "Prolog", "F#", "TypeScript", "Dart",
    "Crystal", "Portuguese", "Spanish", "Italian", "German", "Dutch", "Swedish", "Norwegian",
    "Finnish", "Polish", "Czech", "Greek", "Turkish", "Arabic", "Hebrew", "Japanese",
    "Korean", "Mandarin", "Cantonese", "Vietnamese", "Swahili",
)
_PREFERENCES = (
    "dark mode", "window seats", "aisle seats", "early mornings", "late evenings",
    "written specs", "short meetings", "async standups", "pair programming", "tabs over spaces",
    "spaces over tabs", "vim keybindings", "emacs keybindings", "mechanical keyboards",
    "trackballs", "paper notebooks", "fountain pens", "ebooks", "audiobooks", "trains over planes",
    "metric units", "24-hour time", "ISO dates", "plain text email", "video calls off",
    "standing desks", "quiet offices", "remote work", "small teams", "monorepos",
)
_DISLIKES = (
    "cilantro", "olives", "mushrooms", "blue cheese", "anchovies", "liquorice", "oysters",
    "pineapple on pizza", "instant coffee", "energy drinks", "mayonnaise", "raw onion",
    "long meetings", "open offices", "cold showers", "loud restaurants", "crowded trains",
    "early flights", "small talk", "horror films", "reality TV", "jazz fusion", "country music",
    "heavy metal", "karaoke", "cruises", "theme parks", "golf", "camping in the rain",
    "humid weather",
)
_ALLERGIES = ("peanuts", "shellfish", "penicillin", "pollen", "cats", "latex", "sesame", "soy")
_ROLES = (
    "data engineer", "site reliability engineer", "product designer", "backend developer",
    "frontend developer", "machine learning engineer", "nurse", "teacher", "architect",
    "accountant", "civil engineer", "product manager", "security analyst", "translator",
)
_NAMES = (
    "Alex", "Sam", "Robin", "Jordan", "Casey", "Taylor", "Morgan", "Jamie", "Riley", "Avery",
    "Quinn", "Noa", "Mika", "Ines", "Tomas", "Lena", "Yara", "Omar", "Priya", "Kenji",
)
_THINGS = (
    "favourite band", "favourite film", "favourite book", "favourite album", "favourite game",
    "favourite painter", "favourite author", "favourite podcast", "favourite beach",
    "favourite cafe", "favourite editor", "favourite font", "favourite colour",
    "favourite season", "favourite dish", "favourite football club", "favourite series",
    "favourite composer", "favourite museum", "favourite mountain",
)
# Made-up product and place names: unlimited, and each one a distinct word.
_SYLLABLES = (
    "ka", "lo", "ven", "tri", "mo", "sa", "der", "qui", "zan", "pel", "ro", "nix", "bel",
    "tor", "fa", "gri", "dol", "lem", "sy", "vra", "ost", "mir", "cal", "une",
)


def _coined() -> tuple[str, ...]:
    words = ("".join(parts).capitalize() for parts in product(_SYLLABLES, repeat=3))
    return tuple(w for w in words if len(w) <= 10)


_COINED = _coined()

# The seeded facts of one user, by kind.
_N_USES = 70
_N_LIKES = 46
_N_LEARNING = 10
_N_PREFERS = 20
_N_DISLIKES = 24
_N_ALLERGIES = 6
_N_SINGLE = 4  # city, employer, role, name
assert (  # a wrong constant is a bug in this file, not bad input
    _N_SINGLE + len(_THINGS) + _N_USES + _N_LIKES + _N_LEARNING + _N_PREFERS + _N_DISLIKES
    + _N_ALLERGIES == SEEDED_FACTS
)
_USES_PER_JOB = 3  # two deleted, one switched away from
MAX_JOBS_PER_USER = min(
    _N_USES // _USES_PER_JOB, len(_CITIES) - 1, len(_LANGUAGES) - _N_LEARNING,
    len(_HOBBIES) - _N_LIKES,
)



@dataclass(frozen=True, slots=True)
class SessionPlan:
    session_id: str
    user_id: str
    history: tuple[dict[str, str], ...]  # handed over and processed before the measurement
    new: tuple[dict[str, str], ...]  # the slice this session's measured job processes

    @property
    def messages(self) -> list[dict[str, str]]:
        return [*self.history, *self.new]


@dataclass(slots=True)
class _UserPools:
    """One user's shuffled vocabulary; the first items are seeded, later ones are new."""

    cities: list[str]
    companies: list[str]
    tools: list[str]
    hobbies: list[str]
    languages: list[str]
    values: list[str]
    things: list[str]


def user_id(index: int) -> str:
    return f"bench-user-{index:05d}"


def _pools(seed: int, user: int) -> _UserPools:
    rng = random.Random(f"{seed}:{user}")

    def shuffled(items: tuple[str, ...], count: int | None = None) -> list[str]:
        return rng.sample(items, len(items) if count is None else count)

    coined = shuffled(_COINED, 400)
    return _UserPools(
        cities=shuffled(_CITIES), companies=[f"{w} Labs" for w in coined[:60]],
        tools=coined[60:200], hobbies=shuffled(_HOBBIES), languages=shuffled(_LANGUAGES),
        values=coined[200:400], things=shuffled(_THINGS),
    )


def seed_statements(seed: int, user: int) -> list[str]:
    """The user's 200 statements, one fact each."""
    p = _pools(seed, user)
    rng = random.Random(f"{seed}:{user}:extra")
    said = [
        f"I live in {p.cities[0]}.", f"I work at {p.companies[0]}.",
        f"I work as {rng.choice(_ROLES)}.", f"My name is {rng.choice(_NAMES)}.",
    ]
    said += [f"My {t} is {p.values[i]}." for i, t in enumerate(p.things)]
    said += [f"I use {t}." for t in p.tools[:_N_USES]]
    said += [f"I like {h}." for h in p.hobbies[:_N_LIKES]]
    said += [f"I'm learning {lang}." for lang in p.languages[:_N_LEARNING]]
    said += [f"I prefer {x}." for x in rng.sample(_PREFERENCES, _N_PREFERS)]
    said += [f"I dislike {x}." for x in rng.sample(_DISLIKES, _N_DISLIKES)]
    said += [f"I'm allergic to {x}." for x in rng.sample(_ALLERGIES, _N_ALLERGIES)]
    return said


def seed_sessions(seed: int, user: int) -> list[SessionPlan]:
    """The sessions that seed a user: two user turns of ten statements each."""
    said = seed_statements(seed, user)
    out = []
    for n, at in enumerate(range(0, len(said), SEED_FACTS_PER_JOB)):
        chunk = said[at : at + SEED_FACTS_PER_JOB]
        messages: list[dict[str, str]] = []
        for turn in range(0, len(chunk), 10):
            messages.append({"role": "user", "content": " ".join(chunk[turn : turn + 10])})
            messages.append({"role": "assistant", "content": "Noted."})
        out.append(SessionPlan(f"bench-seed-{user:05d}-{n:02d}", user_id(user), (),
                               tuple(messages)))
    return out


def _statements(p: _UserPools, job: int) -> list[str]:
    """The ten statements of the user's ``job``-th session (0-based)."""
    things = len(p.things)
    first, second = (2 * job) % things, (2 * job + 1) % things
    tools = p.tools[_USES_PER_JOB * job : _USES_PER_JOB * (job + 1)]
    return [
        f"I moved to {p.cities[job + 1]}.",
        f"I work at {p.companies[job + 1]}.",
        f"My {p.things[first]} is {p.values[things + 2 * job]}.",
        f"My {p.things[second]} is {p.values[things + 2 * job + 1]}.",
        f"I switched from {tools[0]} to {p.tools[_N_USES + job]}.",
        f"I stopped using {tools[1]}.",
        f"I stopped using {tools[2]}.",
        f"I'm learning {p.languages[_N_LEARNING + job]}.",
        f"I like {p.hobbies[_N_LIKES + job]}.",
        f"I like {p.hobbies[job % _N_LIKES]}.",
    ]


_REPLIES = ("Noted, thanks.", "Got it.", "Good to know!", "Thanks for telling me.", "Sounds good.")
_SMALL_TALK = (
    "Can you help me plan my week?", "What should I cook tonight?", "Summarise this article",
    "How do I rename a git branch?", "Any tips for sleeping better?",
)


def session_plan(seed: int, user: int, job: int, index: int) -> SessionPlan:
    """Session ``index`` overall: the ``job``-th session of ``user``."""
    if job >= MAX_JOBS_PER_USER:
        raise ValueError(f"at most {MAX_JOBS_PER_USER} sessions per user; add users")
    p = _pools(seed, user)
    rng = random.Random(f"{seed}:{user}:{job}:session")
    history: list[dict[str, str]] = []
    for turn in range(1 + rng.randrange(MAX_HISTORY_TURNS)):
        # The session number keeps every conversation's hashes its own.
        talk = _SMALL_TALK[turn % len(_SMALL_TALK)]
        history.append({"role": "user", "content": f"{talk} (#{index}.{turn})"})
        history.append({"role": "assistant", "content": f"Here is an answer, part {turn + 1}."})
    said = _statements(p, job)
    new: list[dict[str, str]] = []
    for turn in range(0, len(said), 2):
        new.append({"role": "user", "content": f"{said[turn]} {said[turn + 1]}"})
        new.append({"role": "assistant", "content": rng.choice(_REPLIES)})
    return SessionPlan(session_id=f"bench-session-{index:06d}", user_id=user_id(user),
                       history=tuple(history), new=tuple(new))


def sessions(seed: int, users: int, count: int) -> Iterator[SessionPlan]:
    """``count`` sessions, users round-robin so that one user's jobs are far apart in the queue.

    Session n is always the (n // users)-th session of user n % users.
    """
    for index in range(count):
        yield session_plan(seed, index % users, index // users, index)
