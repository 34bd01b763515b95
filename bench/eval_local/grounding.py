"""How much of each portrait the facts it was written from support, read from the
endpoint's record of a run (``--keep-calls``; serve.py). A pure function of the
recorded calls: no model, no server.

A portrait's content words are its words of four letters or more that are not
function words; one is supported when a word of the request's facts shares its first
five letters ("vegetarian", "vegetarians"), or, shorter, begins one ("work",
"works"). Anything else the model added: "a 35-year-old software engineer who
enjoys hiking" from two facts about chess and Siemens. A coarse measure on purpose
(a synonym counts as invented): it is compared across prompt versions, not read as a
rate of false statements.

    python -m bench.eval_local.grounding CALLS.jsonl [CALLS.jsonl ...]
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

_WORD = re.compile(r"[^\W\d_]{4,}")
_FUNCTION_WORDS = frozenset({
    "also", "been", "both", "does", "from", "have", "having", "into", "just", "more",
    "most", "much", "only", "other", "over", "same", "some", "such", "than", "that",
    "their", "them", "then", "there", "these", "they", "this", "those", "very", "what",
    "when", "where", "which", "while", "with", "would", "your", "user", "users", "about",
    "after", "before", "being", "could", "should", "each", "every", "many", "well", "even",
    "still", "onto", "upon", "whom", "whose", "will", "shall",
})
_STEM = 5


@dataclass(frozen=True, slots=True)
class Grounding:
    portraits: int
    content_words: int
    unsupported: int
    unsupported_share_median: float  # per portrait
    fully_supported: int  # portraits with no unsupported word


def content_words(text: str) -> list[str]:
    return [w for w in (m.casefold() for m in _WORD.findall(text)) if w not in _FUNCTION_WORDS]


def unsupported(portrait: str, facts: Sequence[str]) -> list[str]:
    """The portrait's content words no fact's word supports."""
    known = {w.casefold() for f in facts for w in re.findall(r"[^\W_]+", f)}
    stems = {w[:_STEM] for w in known if len(w) >= _STEM}
    return [w for w in content_words(portrait) if not (
        w in known or (w[:_STEM] in stems if len(w) >= _STEM
                       else any(k.startswith(w) for k in known)))]


def portrait_calls(lines: Iterable[str]) -> list[tuple[list[str], str]]:
    """(facts, portrait) of every answered ``user_portrait`` call of a record."""
    found = []
    for line in lines:
        record = json.loads(line)
        if record.get("status") != 200 or "request" not in record:
            continue
        try:
            request = json.loads(record["request"]["messages"][-1]["content"])
            if request.get("task") != "user_portrait":
                continue
            answer = json.loads(record["response"]["choices"][0]["message"]["content"])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        facts = [f["text"] for f in request.get("facts", []) if isinstance(f, dict)]
        if isinstance(answer, dict) and isinstance(answer.get("portrait"), str):
            found.append((facts, answer["portrait"]))
    return found


def measure(calls: Sequence[tuple[list[str], str]]) -> Grounding:
    shares, words, missing, clean = [], 0, 0, 0
    for facts, portrait in calls:
        said = content_words(portrait)
        extra = unsupported(portrait, facts)
        words += len(said)
        missing += len(extra)
        clean += not extra
        shares.append(len(extra) / len(said) if said else 0.0)
    return Grounding(len(calls), words, missing,
                     statistics.median(shares) if shares else 0.0, clean)


def main(argv: Sequence[str]) -> int:
    if not argv:
        print("memfleet: usage: python -m bench.eval_local.grounding CALLS.jsonl ...",
              file=sys.stderr)
        return 2
    calls = []
    for name in argv:
        path = Path(name)
        if not path.is_file():
            print(f"memfleet: grounding: no file {name}", file=sys.stderr)
            return 2
        calls.extend(portrait_calls(path.read_text().splitlines()))
    g = measure(calls)
    print(f"portraits {g.portraits}; content words {g.content_words}, of which no fact"
          f" supports {g.unsupported} ({100 * g.unsupported / max(g.content_words, 1):.1f}%);"
          f" median per portrait {100 * g.unsupported_share_median:.1f}%;"
          f" portraits with none unsupported {g.fully_supported}/{g.portraits}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
