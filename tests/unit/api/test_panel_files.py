"""The memory panel's shipped files, read as they are: no inline script or style, no
markup built from strings, nothing loaded from another origin, small; and its one
setting, MEMFLEET_PANEL_FRAME_ANCESTORS, which cannot write another CSP directive."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from importlib import resources

import pytest
from pydantic import ValidationError

from worker.api.panel_page import PAGE, STATIC_TYPES, PanelFiles, content_security_policy
from worker.api.settings import ApiSettings
from worker.config import settings_error

FOLDER = resources.files("worker.api") / "panel"
SIZE_BUDGET_BYTES = 60_000  # uncompressed, every file of the page together (51 kB with persons)


def _text(name: str) -> str:
    return (FOLDER / name).read_text("utf-8")


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        if self.tags and self.tags[-1][0] == "script":
            self.script_text += data.strip()


def test_the_page_has_no_inline_script_or_style() -> None:
    parsed = _Tags()
    parsed.feed(_text(PAGE))
    scripts = [attrs for tag, attrs in parsed.tags if tag == "script"]
    assert scripts == [{"type": "module", "src": "panel/static/panel.js"}]
    assert parsed.script_text == ""
    assert not [tag for tag, _ in parsed.tags if tag == "style"]
    handlers = [(tag, name) for tag, attrs in parsed.tags for name in attrs
                if name == "style" or name.startswith("on")]
    assert handlers == []


@pytest.mark.parametrize("name", [n for n in STATIC_TYPES if n.endswith(".js")])
def test_no_script_builds_markup_from_strings(name: str) -> None:
    # Fact text goes in as text nodes (view.el, textContent); the browser test shows a
    # fact of markup as its characters. This keeps the sinks out of the code itself.
    sinks = re.findall(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|"
                       r"new Function|\.style\b|setAttribute\(\s*'on", _text(name))
    assert sinks == []


def test_nothing_is_loaded_from_another_origin() -> None:
    for name in (PAGE, *STATIC_TYPES):
        urls = set(re.findall(r"(?:https?:)?//[\w.-]+", _text(name))) - {
            "http://www.w3.org"}  # the SVG namespace, never fetched
        assert urls == set(), name


def test_every_file_of_the_folder_is_served_and_the_whole_is_small() -> None:
    shipped = {entry.name for entry in FOLDER.iterdir() if entry.is_file()}
    assert shipped == {PAGE, *STATIC_TYPES}
    files = PanelFiles.load("'none'").files
    total = sum(len(f.body) for f in files.values())
    assert total < SIZE_BUDGET_BYTES, f"the panel is {total} bytes"


@pytest.mark.parametrize(("given", "directive"), [
    ("'none'", "frame-ancestors 'none'"),
    ("  'self'   https://chat.example.com ", "frame-ancestors 'self' https://chat.example.com"),
    ("https://*.example.com:8443 http://localhost:3000",
     "frame-ancestors https://*.example.com:8443 http://localhost:3000"),
])
def test_the_frame_ancestors_setting_names_origins(given: str, directive: str) -> None:
    sources = ApiSettings(panel_frame_ancestors=given).panel_frame_ancestors
    assert content_security_policy(sources).endswith(f"; {directive}")


@pytest.mark.parametrize("given", [
    "", "*", "'none' 'self'", "'unsafe-inline'", "https://chat.example.com/path",
    "https://a.example; script-src *", "https://a.example,https://b.example", "'self'\n;x",
])
def test_a_frame_ancestors_value_that_could_write_more_is_refused(given: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ApiSettings(panel_frame_ancestors=given)
    line = settings_error(caught.value)
    assert line.startswith("invalid settings: MEMFLEET_PANEL_FRAME_ANCESTORS: must be 'none'")
    assert "script-src" not in line and "example" not in line.split("(", 1)[0]


@pytest.mark.parametrize("given", [
    "https:", "data:", "javascript:", "http: https:", "'self' https:", "https://*", "*.com",
    "https://*.com:8443", "https://chat.example.com *",
])
def test_a_source_without_a_host_is_refused(given: str) -> None:
    # `https:` would let any https origin frame the panel, whose buttons act in one click.
    with pytest.raises(ValidationError) as caught:
        ApiSettings(panel_frame_ancestors=given)
    line = settings_error(caught.value)
    assert line.startswith("invalid settings: MEMFLEET_PANEL_FRAME_ANCESTORS: must be 'none'")
    assert "\n" not in line and "with a host" in line


@pytest.mark.parametrize("given", ["https://*.example.com", "*.example.com:*",
                                   "chat.example.com", "chrome-extension://abcdefgh"])
def test_a_wildcard_or_a_scheme_with_a_host_part_is_kept(given: str) -> None:
    assert ApiSettings(panel_frame_ancestors=given).panel_frame_ancestors == given


# The API's entries; no other command reads the API's settings
# (tests/unit/shared/test_settings_by_process.py).
@pytest.mark.parametrize("command", [
    [sys.executable, "-m", "worker.cli", "api", "--port", "0"],
    [sys.executable, "-m", "api_stub.serve", "--port", "0"],
])
def test_the_api_refuses_a_bare_scheme_in_one_line(command: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
    done = subprocess.run(command, env={**env, "MEMFLEET_PANEL_FRAME_ANCESTORS": "https:"},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "MEMFLEET_PANEL_FRAME_ANCESTORS: must be 'none'" in lines[0]
