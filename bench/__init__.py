"""The benchmarks (docs/bench.md has their figures and commands). Which is which:

- ``bench/*.py``: entry points, each run as ``python -m bench.<name>``. The make
  targets run most (bench, bench-scale, bench-partitions, bench-capacity, chaos,
  autoscale, bench-bounds, bench-ops); eval_variants regenerates the eval suite's
  variants (docs/eval.md). ``bench.version_ab`` is an alias of bench.ab.version_ab.
- ``bench/eval_local/``, ``bench/eval_mem0/``, ``bench/mem0_compare/``: entry points
  that are packages (make eval-local*, eval-mem0, bench-mem0 and the end of bench).
- ``bench/ab/``: the revision A/B harnesses, this checkout beside another git
  revision interleaved on one machine (version_ab + ab_worker: whole jobs; api_ab: the
  memory API; handover_ab: the hand-over call). Run by hand, never by make.
- ``bench/lib/``: what the benchmarks share (servers, workload, worker driving, spans,
  /proc, stubs, statistics, reports, plots); nothing there is a benchmark.
- Results (reports, plots) are written under ``docs/`` (docs/bench/, docs/*.png),
  never beside the code.
"""
