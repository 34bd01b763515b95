"""The regression check of `make eval-local-check`: ``--min-score`` decides the exit code
from memfleet's total, bad flags fail in one line, and the broken prompt is what the
memfleet CLI sends when run through bench.eval_local.broken_prompt. No model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import bench.eval_local.__main__ as eval_local
from bench.eval_local.broken_prompt import BROKEN_EXTRACTION_PROMPT
from worker.eval.compare import System
from worker.providers.prompts import EXTRACTION_PROMPT


def _ran(held: int, assertions: int) -> list[System]:
    return [System("memfleet", {"kinds": [], "total": {"held": held,
                                                       "assertions": assertions}}),
            System("raw-messages", {"kinds": [], "total": {"held": 0, "assertions": 9}})]


def test_the_check_passes_at_the_bar_and_fails_below_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert eval_local._check(_ran(6, 10), 60.0, broken=False) == 0
    assert "held 6/10 (60.0%); --min-score 60%: passes" in capsys.readouterr().out
    assert eval_local._check(_ran(5, 10), 60.0, broken=True) == 1
    out = capsys.readouterr().out
    assert "the broken extraction prompt held 5/10 (50.0%)" in out and "FAILS" in out
    assert eval_local._check(_ran(0, 0), 0.5, broken=False) == 1


@pytest.mark.parametrize(("flags", "says"), [
    (["--min-score", "150"], "--min-score is a percentage from 0 to 100, not 150"),
    (["--min-score", "50", "--systems", "mem0-1.0.9"], "add it to --systems"),
    (["--broken-extraction-prompt", "--systems", "mem0-2.2.1"], "add it to --systems"),
])
def test_a_check_flag_that_cannot_work_fails_in_one_line(
        flags: list[str], says: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").touch()
    code = eval_local.main(["--smoke", "--venv", str(tmp_path / "venv"),
                            "--cache", str(tmp_path / "cache"), *flags])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1 and says in err[0]


def test_the_broken_cli_sends_the_broken_extraction_prompt_and_only_that_one() -> None:
    probe = ("from bench.eval_local.broken_prompt import break_extraction\n"
             "from worker.providers import openai_chat as c\n"
             "before = (c._EXTRACTION.prompt, c._CONSOLIDATION.prompt)\n"
             "break_extraction()\n"
             "print(before[0] == c._EXTRACTION.prompt, before[1] == c._CONSOLIDATION.prompt)\n"
             "print(c._EXTRACTION.prompt == __import__('bench.eval_local.broken_prompt',"
             " fromlist=['x']).BROKEN_EXTRACTION_PROMPT)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.split() == ["False", "True", "True"]
    assert BROKEN_EXTRACTION_PROMPT != EXTRACTION_PROMPT


def test_a_partial_run_is_reported_beside_baselines_scored_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.eval_local import report
    from worker.eval.baselines import baseline_scores
    from worker.eval.report import scores_json

    scenarios = report.scenarios_of(["update-city", "plain-intro"])
    raw = scores_json(baseline_scores(scenarios)["raw-messages"])
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"partial": True, "systems": {"memfleet": raw}}))
    assert report.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "2 scenarios on Qwen2.5-Coder-1.5B-Instruct Q4_K_M; systems that finished: memfleet" \
        in out
    header = next(line for line in out.splitlines() if line.startswith("kind"))
    assert header.split() == ["kind", "memfleet", "empty", "raw-messages", "latest-session"]
    (tmp_path / "empty.json").write_text("{}")
    assert report.main([str(tmp_path / "empty.json")]) == 2
    assert "holds no system's scores" in capsys.readouterr().err
