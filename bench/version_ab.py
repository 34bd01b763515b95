"""``python -m bench.version_ab``: the whole-job A/B of two revisions, bench.ab.version_ab.

The command docs/bench.md and the issues cite; the harness lives in bench/ab/.
"""

from __future__ import annotations

from bench.ab.version_ab import main

if __name__ == "__main__":
    raise SystemExit(main())
