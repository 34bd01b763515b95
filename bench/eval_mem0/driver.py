"""The mem0 side of bench.eval_mem0, run by a mem0 virtualenv's python.

    VENV/bin/python driver.py SPEC.json RESULT.json

It imports nothing of memfleet (mem0's virtualenv has only mem0 and a PostgreSQL
driver). SPEC holds mem0's config (``Memory.from_config``) and, per user, the adds
(``{"agent_id", "messages"}``, in order). Each is one ``Memory.add``. RESULT gets
mem0's version and, per user, ``add``'s answer to each add (null when it raised),
the number that raised and the first errors.
"""

from __future__ import annotations

import json
import sys
import traceback
from importlib.metadata import version
from typing import Any


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as spec_file:
        spec = json.load(spec_file)
    from mem0 import Memory  # only in mem0's virtualenv

    memory = Memory.from_config(spec["config"])
    answers: dict[str, list[Any]] = {}
    errors: list[str] = []
    failed = 0
    for user in spec["users"]:
        got = answers.setdefault(user["user_id"], [])
        for add in user["adds"]:
            scope = {"agent_id": add["agent_id"]} if add.get("agent_id") else {}
            try:
                got.append(memory.add(add["messages"], user_id=user["user_id"], **scope))
            except Exception:  # noqa: BLE001 - counted and reported, the run goes on
                failed += 1
                got.append(None)
                if len(errors) < 5:
                    errors.append(traceback.format_exc(limit=4))
    result = {"version": version("mem0ai"), "answers": answers, "failed": failed,
              "errors": errors}
    with open(sys.argv[2], "w", encoding="utf-8") as out:
        json.dump(result, out, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
