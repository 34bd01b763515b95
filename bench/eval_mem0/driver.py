"""The mem0 side of bench.eval_mem0, run by a mem0 virtualenv's python.

    VENV/bin/python driver.py SPEC.json RESULT.json

It imports nothing of memfleet (mem0's virtualenv has only mem0 and a PostgreSQL
driver). SPEC holds mem0's config (``Memory.from_config``) and, per user, the adds
(``{"agent_id", "messages"}``, in order). Each is one ``Memory.add``. With ``"clock": "scenario"``
each add is made at the scenario's moment (``at``): see ``_at``. RESULT gets
mem0's version and, per user, ``add``'s answer to each add (null when it raised),
the number that raised and the first errors. A user's ``"questions"`` (``{"ask"}``),
when given, are searched after its adds (``Memory.search``, as mem0's docs show it:
the question as the query, the user's id, mem0's default limit); RESULT's
``"searches"`` holds, per user, each search's hits (``{"memory", "agent_id",
"created_at"}``), null when it raised.
"""

from __future__ import annotations

import datetime as dt
import inspect
import json
import re
import sys
import traceback
from importlib.metadata import version
from typing import Any

_TODAY = re.compile(r"Today's date is \d{4}-\d{2}-\d{2}")


def _at(moment: dt.datetime) -> dict[str, Any]:
    """Make the next add at ``moment``, as far as mem0 lets a caller: its public API takes
    a memory's ``created_at`` in ``metadata`` (1.x and 2.x keep a given one); neither
    takes the date its prompts tell the model (``timestamp`` is platform-only in 2.x and
    raises in the library), so the date mem0 itself writes into them is set to the
    moment: 1.x formats "Today's date is ..." into its prompt strings at import, 2.x
    reads ``datetime.now`` in ``mem0.configs.prompts`` when it builds the prompt."""
    import mem0.configs.prompts as prompts

    class Frozen(dt.datetime):
        @classmethod
        def now(cls, tz: dt.tzinfo | None = None) -> Frozen:
            value = moment.astimezone(tz) if tz is not None else moment.replace(tzinfo=None)
            return cls.fromtimestamp(value.timestamp(), tz=value.tzinfo)

    prompts.datetime = Frozen
    today = f"Today's date is {moment:%Y-%m-%d}"
    for name, module in list(sys.modules.items()):
        if name.startswith("mem0") and module is not None:
            for attr, value in list(vars(module).items()):
                if isinstance(value, str) and _TODAY.search(value):
                    setattr(module, attr, _TODAY.sub(today, value))
    return {"metadata": {"created_at": moment.isoformat()}}


def _search(memory: Any, ask: str, user_id: str) -> list[dict[str, Any]]:
    """One search's hits, with mem0's default limit. mem0 1.x takes ``user_id=``; 2.x
    refuses it and takes the ids in ``filters``."""
    if "user_id" in inspect.signature(memory.search).parameters:
        found = memory.search(ask, user_id=user_id)
    else:
        found = memory.search(ask, filters={"user_id": user_id})
    hits = found.get("results", []) if isinstance(found, dict) else found
    return [{"memory": h.get("memory"), "agent_id": h.get("agent_id"),
             "created_at": h.get("created_at")} for h in hits or [] if isinstance(h, dict)]


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as spec_file:
        spec = json.load(spec_file)
    from mem0 import Memory  # only in mem0's virtualenv

    memory = Memory.from_config(spec["config"])
    answers: dict[str, list[Any]] = {}
    searches: dict[str, list[Any]] = {}
    errors: list[str] = []
    failed = failed_searches = 0
    for user in spec["users"]:
        got = answers.setdefault(user["user_id"], [])
        for add in user["adds"]:
            scope: dict[str, Any] = {"agent_id": add["agent_id"]} if add.get("agent_id") else {}
            try:
                if spec.get("clock") == "scenario" and add.get("at"):
                    scope.update(_at(dt.datetime.fromisoformat(add["at"])))
                got.append(memory.add(add["messages"], user_id=user["user_id"], **scope))
            except Exception:  # noqa: BLE001 - counted and reported, the run goes on
                failed += 1
                got.append(None)
                if len(errors) < 5:
                    errors.append(traceback.format_exc(limit=4))
        found = searches.setdefault(user["user_id"], [])
        for question in user.get("questions", []):
            try:
                found.append(_search(memory, question["ask"], user["user_id"]))
            except Exception:  # noqa: BLE001 - counted and reported, the run goes on
                failed_searches += 1
                found.append(None)
                if len(errors) < 5:
                    errors.append(traceback.format_exc(limit=4))
    result = {"version": version("mem0ai"), "answers": answers, "failed": failed,
              "searches": searches, "failed_searches": failed_searches, "errors": errors}
    with open(sys.argv[2], "w", encoding="utf-8") as out:
        json.dump(result, out, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
