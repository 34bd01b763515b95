"""The docs name the alerts alerts.yml defines, all of them and no other: a runbook for
each in observability.md, a row for each in operations.md's "Alerts to expect", no
alert name anywhere in the docs that the rules do not have, and no partial list of
what alerts.yml holds."""

from __future__ import annotations

import re
from pathlib import Path

import yaml  # type: ignore[import-untyped]

from tests.unit.deploy.test_dashboard import ALERTS, ROOT

DOCS = ROOT / "docs"
DOC_FILES = [*sorted(DOCS.glob("*.md")), ROOT / "README.md", ROOT / "deploy" / "README.md"]
NAME = re.compile(r"\bMemfleet[A-Z][A-Za-z]*\b")


def alert_names() -> set[str]:
    rules = yaml.safe_load(ALERTS.read_text())
    return {rule["alert"] for group in rules["groups"] for rule in group["rules"]}


def section(doc: Path, heading: str) -> str:
    """The text under ``heading`` down to the next heading of its level or above."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = doc.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading) + 1
    for end in range(start, len(lines)):
        hashes = len(lines[end]) - len(lines[end].lstrip("#"))
        if 0 < hashes <= level and lines[end][hashes:hashes + 1] == " ":
            return "\n".join(lines[start:end])
    return "\n".join(lines[start:])


def test_there_are_alerts_to_document() -> None:
    assert len(alert_names()) >= 7


def test_observability_md_has_one_runbook_heading_for_each_alert() -> None:
    headings = [line for line in section(DOCS / "observability.md", "## Alerts").splitlines()
                if line.startswith("### ")]
    named = [name for line in headings for name in NAME.findall(line)]
    assert sorted(named) == sorted(alert_names())


def test_operations_md_has_one_row_for_each_alert() -> None:
    rows = [line for line in section(DOCS / "operations.md", "## Alerts to expect").splitlines()
            if line.startswith("| `Memfleet")]
    named = [line.split("`")[1] for line in rows]
    assert sorted(named) == sorted(alert_names())


def test_no_doc_names_an_alert_the_rules_do_not_have() -> None:
    for doc in DOC_FILES:
        # Class names (MemfleetError and its kin, the TypeScript client's
        # MemfleetRedisClient and MemfleetHttpClient) are not alerts.
        names = {n for n in NAME.findall(doc.read_text(encoding="utf-8"))
                 if not n.endswith(("Error", "Client"))}
        assert names <= alert_names(), (doc.name, sorted(names - alert_names()))


def test_a_line_that_says_what_alerts_yml_holds_names_all_its_alerts_or_none() -> None:
    """As observability.md's file list once did, naming three of seven."""
    for doc in DOC_FILES:
        for line in doc.read_text(encoding="utf-8").splitlines():
            if "alerts.yml" in line and (named := set(NAME.findall(line))):
                assert named == alert_names(), (doc.name, line)


def test_the_section_reader_stops_at_the_next_heading_of_its_level(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("# T\n## Alerts\n### A\n#x\n## Next\n### B\n", encoding="utf-8")
    assert section(doc, "## Alerts") == "### A\n#x"
    assert section(doc, "## Next") == "### B"
