"""memfleet and mem0 scored on `memfleet eval`'s suite, on one model: ``python -m bench.eval_mem0``.

One OpenAI-compatible stub (api_stub.llm_stub, in this process) answers every
system's prompts from the same offline rules (its mem0 answer mode is
api_stub.llm_mem0), so the comparison isolates what each pipeline does with the
same extractions and decisions. One throwaway PostgreSQL with pgvector, a
database per system.

- memfleet: `memfleet eval --json` itself, the openai providers on the stub;
  again with ``--control add-only`` (every consolidation decision made ADD);
- mem0 1.0.9 and the newest mem0 on PyPI, each in a throwaway virtualenv
  (``driver.py`` under its python): one ``Memory.add`` per memfleet commit, with
  the same new messages, the scenario's user and the session's agent; its end
  state (``add``'s answers replayed, reconciled with its table: mem0_state) is
  scored by the suite's own scorer (worker.eval.score).

Printed: each system's `memfleet eval` table, then one table with a column per
system; a plot (docs/eval_mem0.png). Never in `make test` (it pip-installs mem0).
"""
