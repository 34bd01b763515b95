"""The mem0 side of bench.mem0_compare, run by a mem0 virtualenv's python.

    VENV/bin/python driver.py SPEC.json RESULT.json

It imports nothing of memfleet (mem0's virtualenv has only mem0 and a
PostgreSQL driver): SPEC holds mem0's config (``Memory.from_config``) and the
turns, each ``{"user_id", "messages"}``; every turn is one ``Memory.add``, one
after another, each timed. RESULT gets mem0's version, the times (ms), the
turns that raised and the first errors.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from importlib.metadata import version


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as spec_file:
        spec = json.load(spec_file)
    from mem0 import Memory  # only in mem0's virtualenv

    memory = Memory.from_config(spec["config"])
    durations_ms: list[float] = []
    errors: list[str] = []
    failed = 0
    for turn in spec["turns"]:
        started = time.perf_counter()
        try:
            memory.add(turn["messages"], user_id=turn["user_id"])
        except Exception:  # noqa: BLE001 - counted and reported, the run goes on
            failed += 1
            if len(errors) < 5:
                errors.append(traceback.format_exc(limit=4))
        durations_ms.append((time.perf_counter() - started) * 1000)
    result = {"version": version("mem0ai"), "durations_ms": durations_ms, "failed": failed,
              "errors": errors}
    with open(sys.argv[2], "w", encoding="utf-8") as out:
        json.dump(result, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
