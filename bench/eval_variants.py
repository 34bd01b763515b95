"""The suite's generated variants: each kind brought to ``PER_KIND`` scenarios.

    python -m bench.eval_variants          # rewrites worker/eval/scenarios/*.variants.json
    python -m bench.eval_variants --check  # exit 1 when the committed files differ

A variant is a hand-written scenario with its names and values swapped for others of
the same sort (a city for a city, a pet's name for a pet's name, a job for a job),
the same in its turns, its gold words and its questions, so what it tests is the
same and its gold stays right. Only the values vary: the wording, the order and the
dates are the hand-written ones. Each variant's choices come from a generator seeded
with ``SEED`` and the variant's id, so the files are reproducible; they are committed
(package data: an installed `memfleet eval` has them), and a unit test holds them
equal to this generator's output.

Which scenarios are varied: those holding a value of a known sort, cheapest first
(fewest commits: a real model pays per commit), round-robin until the kind has
``PER_KIND`` scenarios; a scenario costing more than ``MAX_RUNS`` commits is varied
only when its kind has nothing cheaper.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from worker.eval.run import plan_steps
from worker.eval.suite import KINDS, Scenario

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "worker" / "eval" / "scenarios"
SEED = 38
PER_KIND = 10
MAX_RUNS = 3

# Values of one sort are interchangeable in every scenario that names one. A variant
# takes only values its source does not name, and none of the retrieval haystack's
# words (worker/eval/haystack.py: no "Italian", no "piano"), which would hold a gold.
POOLS: dict[str, tuple[str, ...]] = {
    "city": ("Bergen", "Oslo", "Tokyo", "Zurich", "Paris", "Lyon", "Barcelona", "Munich",
             "Leeds", "Monaco", "Lima", "Reykjavik", "Halifax", "Toronto", "Bristol",
             "Vienna", "Glasgow", "Cork", "Dublin", "Copenhagen", "Stockholm", "Nairobi",
             "Madrid", "Porto", "Lisbon", "Prague", "Seville", "Bologna", "Tallinn",
             "Valencia", "Antwerp", "Aarhus", "Bilbao", "Ghent", "Turin", "Basel", "Graz",
             "Utrecht", "Nantes", "Galway", "Trondheim", "Ljubljana"),
    "german_city": ("Hamburg", "Köln", "Leipzig", "Dresden", "Bremen", "Stuttgart"),
    "company": ("Airbus", "Klarna", "Spotify", "Bosch", "Siemens", "Zalando", "Philips", "Nokia",
                "Ericsson", "Adidas", "Heineken", "Volvo", "Canva", "Atlassian"),
    "person": ("Alex", "Sam", "Priya", "Maya", "Tom", "Lena", "Omar", "Nina", "Raj", "Elif",
               "Jonas", "Chloe", "Mateo"),
    "pet": ("Biscuit", "Mochi", "Nugget", "Pepper", "Pickle", "Waffles", "Ziggy", "Bean",
            "Olive", "Toffee", "Pumpkin", "Maple", "Figaro"),
    "nickname": ("Ace", "Captain", "Boss", "Chief", "Champ", "Skipper", "Maestro"),
    "database": ("MongoDB", "MySQL", "PostgreSQL", "SQLite", "MariaDB", "Cassandra"),
    "editor": ("Neovim", "Emacs", "Vim", "Sublime", "Helix", "Zed"),
    "proglang": ("Kotlin", "Rust", "Scala", "Swift", "Elixir", "Haskell", "Ruby"),
    "app": ("Notion", "Slack", "Figma", "Trello", "Asana", "Miro", "Jira", "Obsidian"),
    "language": ("Portuguese", "Catalan", "Korean", "Japanese", "Greek", "Turkish", "Dutch"),
    "job": ("radiographer", "nurse", "accountant", "dentist", "barista", "pharmacist",
            "electrician", "architect", "plumber", "librarian", "paramedic"),
    "instrument": ("violin", "harp", "cello", "guitar", "drums", "flute"),
    "allergen": ("shellfish", "sesame", "penicillin"),
    "colour": ("teal", "maroon", "ochre", "mauve", "indigo", "crimson"),
    "genre": ("jazz", "techno", "opera", "reggae", "blues"),
    "sport": ("climbing", "swimming", "rowing", "fencing", "surfing"),
}
# The fields that hold no words of the conversation.
_FIXED = {"id", "kind", "at", "role", "agent", "end_at", "match", "valid_from", "scope",
          "visible_to", "commit_each_turn", "once"}
_ARTICLE = re.compile(r"\b([Aa])(n?) (\w)")


def _pattern(value: str) -> re.Pattern[str]:
    # Proper names as written; common nouns in either case of their first letter.
    flags = 0 if value[0].isupper() else re.IGNORECASE
    return re.compile(rf"(?<![\w-]){re.escape(value)}(?![\w-])", flags)


def values_in(raw: dict[str, Any]) -> list[tuple[str, str]]:
    """(sort, value) of every pool value the scenario's text names, in pool order."""
    text = json.dumps(raw, ensure_ascii=False)
    return [(sort, v) for sort, pool in POOLS.items() for v in pool if _pattern(v).search(text)]


def _swap(text: str, mapping: dict[str, str]) -> str:
    for old, new in mapping.items():
        def keep_case(m: re.Match[str], new: str = new) -> str:
            return new[0].upper() + new[1:] if m[0][0].isupper() else new

        text = _pattern(old).sub(keep_case, text)
    # "a accountant" -> "an accountant" where a swap changed the word after it
    if any(old[0].lower() in "aeiou" or new[0].lower() in "aeiou"
           for old, new in mapping.items()):
        text = _ARTICLE.sub(lambda m: f"{m[1]}{'n' if m[3].lower() in 'aeiou' else ''} {m[3]}",
                            text)
    return text


def _walk(node: Any, mapping: dict[str, str], key: str = "") -> Any:
    if isinstance(node, dict):
        return {k: v if k in _FIXED else _walk(v, mapping, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_walk(v, mapping, key) for v in node]
    if isinstance(node, str):
        return _swap(node, mapping)
    return node


def variant(raw: dict[str, Any], number: int, seed: int = SEED) -> dict[str, Any]:
    """The scenario with each of its values swapped for an unused one of its sort."""
    rng = random.Random(f"{seed}:{raw['id']}:{number}")
    found = values_in(raw)
    taken = {v for _, v in found}
    mapping: dict[str, str] = {}
    for sort, value in found:
        choices = [v for v in POOLS[sort] if v not in taken]
        new = rng.choice(choices)
        taken.add(new)
        mapping[value] = new
    out = _walk(raw, mapping)
    out["id"] = f"{raw['id']}-v{number}"
    out["about"] = f"{out['about']} (variant {number} of {raw['id']})"
    return dict(out)


def _runs(raw: dict[str, Any]) -> int:
    return len(plan_steps(Scenario.model_validate(raw)))


def variants(raws: Sequence[dict[str, Any]], per_kind: int = PER_KIND) -> list[dict[str, Any]]:
    """The variants that bring each kind to ``per_kind`` scenarios."""
    out: list[dict[str, Any]] = []
    for kind in KINDS:
        mine = [r for r in raws if r["kind"] == kind]
        varied = sorted((r for r in mine if values_in(r)), key=lambda r: (_runs(r), r["id"]))
        cheap = [r for r in varied if _runs(r) <= MAX_RUNS] or varied
        made: dict[str, int] = {}
        while cheap and len(mine) + sum(made.values()) < per_kind:
            for raw in cheap:
                if len(mine) + sum(made.values()) >= per_kind:
                    break
                made[raw["id"]] = made.get(raw["id"], 0) + 1
                out.append(variant(raw, made[raw["id"]]))
    return out


def hand_written(folder: Path = SUITE) -> list[dict[str, Any]]:
    files = sorted(p for p in folder.glob("*.json") if not p.name.endswith(".variants.json"))
    return [s for p in files for s in json.loads(p.read_text("utf-8"))]


def render(folder: Path = SUITE) -> dict[Path, str]:
    """Each kind's variants file and its text."""
    made = variants(hand_written(folder))
    return {folder / f"{kind}.variants.json":
            json.dumps([v for v in made if v["kind"] == kind], indent=1, ensure_ascii=False)
            + "\n" for kind in KINDS if any(v["kind"] == kind for v in made)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.eval_variants", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the committed files differ from the generator's")
    args = parser.parse_args(argv)
    files = render()
    stale = [p for p, text in files.items()
             if not p.exists() or p.read_text("utf-8") != text]
    stale += [p for p in SUITE.glob("*.variants.json") if p not in files]
    if args.check:
        for path in stale:
            print(f"stale: {path.relative_to(ROOT)}")
        return 1 if stale else 0
    for path in SUITE.glob("*.variants.json"):
        if path not in files:
            path.unlink()
    for path, text in files.items():
        path.write_text(text, "utf-8")
    print(f"{sum(len(json.loads(t)) for t in files.values())} variants in {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
