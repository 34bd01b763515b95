"""`make trace` (deploy/observability/render_trace.py) runs: it draws docs/trace.png's
picture from the spans of a real job, with its own throwaway servers, and names the
stage order it saw, so the picture follows the pipeline instead of rotting beside it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "deploy" / "observability" / "render_trace.py"


def test_the_trace_is_drawn_from_a_real_job_with_the_summary_beside_extraction(
    tmp_path: Path,
) -> None:
    out = tmp_path / "trace.png"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
    env["PYTHONPATH"] = str(ROOT)
    # A short model latency: enough for the stages beside each other to overlap.
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), "--llm-latency-ms", "80"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == (
        f"wrote {out} (14 spans): lock ▸ cursor ▸ extract ‖ summary ▸ embed ▸ consolidate"
        " ▸ persist")
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert done.stderr == "", "the workers' log lines stay out of the command's output"
