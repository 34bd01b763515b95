"""The garbage collector of a long-running server process (`memfleet worker`, the
memory API's server processes), set once start-up is done.

A full collection walks every tracked object: in a process that imported
pydantic, openai, FastAPI and the rest, that is a pause long enough to show in
a request's or a job's tail latency. Tests and the demo share their process
with other code and leave the collector alone.
"""

from __future__ import annotations

import gc

# Allocations between young collections (CPython's default is 700). A job
# allocates tens of thousands of short-lived objects; fewer young collections
# cost less in all and take p95/p99 down (interleaved A/B in docs/bench.md).
YOUNG_GC_THRESHOLD = 10_000


def quiet_garbage_collector() -> None:
    """Keep the collector off what start-up built, and collect the young less often.

    Imports, pools and clients live as long as the process; without ``freeze``
    every full collection walks them all again. Collected first so no garbage
    is frozen.
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GC_THRESHOLD, older, oldest)
