"""`memfleet eval`'s mistakes are found before anything runs (a run on a real model takes
long): one `memfleet: ...` line and exit 2, no server touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.cli.main import main


@pytest.mark.parametrize(("args", "says"), [
    (["--min-score", "2"], "memfleet: eval: --min-score is a fraction from 0 to 1, got 2.0"),
    (["--min-score", "-0.1"], "memfleet: eval: --min-score is a fraction from 0 to 1"),
    (["--min-score", "most"], "memfleet: eval: argument --min-score: invalid float value"),
    (["--kind", "gossip"], "memfleet: eval: argument --kind: invalid choice: 'gossip'"),
    (["--control", "none"], "memfleet: eval: argument --control: invalid choice: 'none'"),
    (["--plot", "{tmp}/scores.txt"], "memfleet: eval: --plot {tmp}/scores.txt: the file must "
                                     "end in .png, .svg, .pdf"),
    (["--json", "{tmp}/no/such/folder/x.json"], "memfleet: eval: --json {tmp}/no/such/folder/"
                                                "x.json: no folder"),
    (["--scenarios", "{tmp}/nowhere"], "memfleet: --scenarios {tmp}/nowhere: not a folder"),
])
def test_an_eval_mistake_is_one_line_and_exit_2(
    args: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No servers: a mistake must be found before the embedded ones are looked for.
    monkeypatch.setenv("MEMFLEET_HOME_DIR", str(tmp_path / "home"))
    for name in ("MEMFLEET_DATABASE_URL", "MEMFLEET_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    argv = ["eval", *(a.replace("{tmp}", str(tmp_path)) for a in args)]
    try:
        code = main(argv)
    except SystemExit as exited:
        code = exited.code  # type: ignore[assignment]
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(says.replace("{tmp}", str(tmp_path))), err
