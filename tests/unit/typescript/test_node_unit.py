"""The TypeScript client's unit tests (clients/typescript/src/test/unit/), run by node's test
runner: validation reasons, windows, payload and job bytes, enqueue.lua's arguments
and session tags against the Python side's fixtures (tests/fixtures/protocol/), the
replies and the HTTP answers as errors, the event stream's format."""

from __future__ import annotations

from tests.typescript_node import require_build, run_node


def test_the_node_unit_suite_passes() -> None:
    require_build()
    done = run_node(["--test", "clients/typescript/dist/test/unit/"], timeout_s=120)
    assert "# fail 0" in done.stdout and "# pass " in done.stdout
