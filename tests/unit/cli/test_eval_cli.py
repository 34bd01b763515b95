"""`memfleet eval`'s mistakes are found before anything runs (a run on a real model takes
long): one `memfleet: ...` line and exit 2, no server touched."""

from __future__ import annotations

import json
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
    (["--longmemeval", "{tmp}/none.json"], "memfleet: eval: --longmemeval {tmp}/none.json: "
                                          "no such file"),
    (["--longmemeval", "{tmp}/lme.json", "--kind", "plain"],
     "memfleet: eval: --kind does not go with --longmemeval"),
    (["--longmemeval-limit", "0"], "memfleet: eval: --longmemeval-limit must be at least 1"),
    (["--longmemeval-others", "-1"], "memfleet: eval: --longmemeval-others must be at least 0"),
    (["--longmemeval", "{tmp}/notjson.json"], "memfleet: --longmemeval {tmp}/notjson.json: "
                                              "not JSON: "),
    (["--longmemeval", "{tmp}/object.json"], "memfleet: --longmemeval {tmp}/object.json: not "
                                             "a JSON list of LongMemEval items"),
    (["--longmemeval", "{tmp}/lme.json"], "memfleet: --longmemeval {tmp}/lme.json: item 1: "
                                          "no field 'question_date'"),
    (["--control", "empty-read"], "memfleet: eval: --control empty-read needs --qa"),
    (["--rerank"], "memfleet: eval: --rerank needs --retrieval"),
    (["--qa", "--rerank"], "memfleet: eval: --rerank needs --retrieval"),
    (["--qa", "--control", "nothing"], "memfleet: eval: argument --control: invalid choice"),
    (["--longmemeval", "{tmp}/none.json", "--qa"], "memfleet: eval: --longmemeval "
                                                   "{tmp}/none.json: no such file"),
    (["--qa", "--scenarios", "{tmp}/unasked"], "memfleet: eval: --qa and --retrieval need "
                                               "questions: no scenario chosen has any"),
    (["--retrieval", "--kind", "retractions"], "memfleet: eval: --qa and --retrieval need "
                                               "questions"),
    (["--qa", "--judge", "gpt"], "memfleet: eval: no option --judge (see"),
    (["--longmemeval", "{tmp}/other.json"], "memfleet: eval: longmemeval: 1 items, 0 taken "
                                            "(none); skipped: 1 single-session-user: nothing "
                                            "to run"),
])
def test_an_eval_mistake_is_one_line_and_exit_2(
    args: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No servers: a mistake must be found before the embedded ones are looked for.
    monkeypatch.setenv("MEMFLEET_HOME_DIR", str(tmp_path / "home"))
    for name in ("MEMFLEET_DATABASE_URL", "MEMFLEET_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    item = {"question_id": "q1", "question_type": "knowledge-update", "question": "?",
            "answer": "Lisbon", "question_date": "2023/07/01 (Sat) 10:00",
            "haystack_session_ids": [], "haystack_dates": [], "haystack_sessions": [],
            "answer_session_ids": []}
    (tmp_path / "notjson.json").write_text("[{", encoding="utf-8")
    (tmp_path / "object.json").write_text("{}", encoding="utf-8")
    missing = {k: v for k, v in item.items() if k != "question_date"}
    (tmp_path / "lme.json").write_text(json.dumps([item, missing]), encoding="utf-8")
    other = {**item, "question_type": "single-session-user"}
    (tmp_path / "other.json").write_text(json.dumps([other]), encoding="utf-8")
    (tmp_path / "unasked").mkdir()
    (tmp_path / "unasked" / "plain.json").write_text(json.dumps([{
        "id": "p", "kind": "plain", "about": "no question",
        "sessions": [{"id": "s1", "at": "2026-03-02T09:00:00Z",
                      "turns": [{"role": "user", "content": "I live in Leeds."}]}],
        "expect": {"active": [{"words": ["Leeds"]}]}}]), encoding="utf-8")
    argv = ["eval", *(a.replace("{tmp}", str(tmp_path)) for a in args)]
    try:
        code = main(argv)
    except SystemExit as exited:
        code = exited.code  # type: ignore[assignment]
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(says.replace("{tmp}", str(tmp_path))), err


@pytest.mark.parametrize(("env", "says"), [
    ({"MEMFLEET_EVAL_JUDGE_MODEL": " "}, "memfleet: MEMFLEET_EVAL_JUDGE_MODEL is blank"),
    ({"MEMFLEET_LLM_PROVIDER": "openai", "MEMFLEET_LLM_BASE_URL": "http://127.0.0.1:9/v1",
      "MEMFLEET_EXTRACT_MODEL": " "},
     "memfleet: memfleet eval --qa needs MEMFLEET_EVAL_ANSWER_MODEL or MEMFLEET_EXTRACT_MODEL"),
])
def test_a_qa_model_that_cannot_answer_is_one_line_before_the_run(
    env: dict[str, str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMFLEET_HOME_DIR", str(tmp_path / "home"))
    for name in ("MEMFLEET_DATABASE_URL", "MEMFLEET_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    try:
        code = main(["eval", "--qa", "--kind", "plain"])
    except SystemExit as exited:
        code = exited.code  # type: ignore[assignment]
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(says), err
