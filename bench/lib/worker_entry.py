"""The worker functions the job benches call, from either layout of worker/.

bench.ab.version_ab runs this checkout's bench/ against another revision's worker;
a revision from before worker/ was grouped into packages (issue 26) has these
functions in flat modules (worker.app, worker.client). Everything else the
benches use kept its name.
"""

from __future__ import annotations

try:
    from worker.client.handover import schedule_memory_persistence
    from worker.fleet.app import build_worker, drain_queue, new_event_loop
except ModuleNotFoundError:  # a revision with the flat layout
    from worker.app import build_worker, drain_queue, new_event_loop  # type: ignore[no-redef]

    from worker.client import schedule_memory_persistence  # type: ignore[no-redef]

__all__ = ["build_worker", "drain_queue", "new_event_loop", "schedule_memory_persistence"]
