"""mem0 and memfleet side by side on the OpenAI protocol: ``python -m bench.mem0_compare``.

One zero-latency OpenAI-compatible stub (api_stub.llm_stub, in this process;
its mem0 answer mode, api_stub.llm_mem0, answers mem0's prompts from the same
rules that answer memfleet's), one throwaway PostgreSQL with pgvector (a
database per system) and one workload: ``--users`` users x ``--turns`` turns,
each turn a conversation slice of five user messages holding ten statements
(bench.lib.workload's measured slices), one of which moves the user to a new city.

- mem0 1.0.9 and the newest mem0 on PyPI, each installed in its own throwaway
  virtualenv, run by ``driver.py`` under that virtualenv's python: one
  ``Memory.add`` per turn, one after another, each timed;
- memfleet: every turn handed over with worker.client.handover.schedule_memory_persistence,
  then one ``memfleet worker --burst`` process with the openai providers drains
  them; each job's time is its memory_run row's started_at..finished_at.

Per system: time per turn (p50 and the whole run's total), the model calls per
turn the stub counted (chat, embeddings), and the "city" facts still active per
user at the end (1 is right: each move supersedes the last city).
"""
