"""No file under deploy/ turns the chat stand-in on (issue 37, finding 3).

MEMFLEET_CHAT_STANDIN mounts ``POST /chat/{session_id}``, through which any end
user's token feeds memory whatever it sends: a demo's and a bench's, never a
deployment's. Every file under deploy/ (but its prose, *.md) is read; each place
that names the setting must set it to a value the settings parse as false. A value
the environment fills in (``${...}``, a compose entry without a value, a k8s
``valueFrom``) counts as on: it would let a shell or a secret turn it on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import TypeAdapter, ValidationError

from worker.api.settings import ApiSettings

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
NAME = "MEMFLEET_CHAT_STANDIN"
_BOOL = TypeAdapter(bool)
# Names are matched without regard to case, as the settings read them.
_MENTION = re.compile(NAME, re.IGNORECASE)
# `NAME=value`, `NAME: value`, Dockerfile `ENV NAME value`, `export NAME=value`.
_ASSIGNED = re.compile(rf"\b{NAME}\b(?:\s*[=:]\s*|\s+)(?P<value>\S*)", re.IGNORECASE)


def _is_off(value: Any) -> bool:
    if isinstance(value, str) and ("$" in value or not value.strip()):
        return False  # filled in from the environment, or unparseable
    try:
        return _BOOL.validate_python(value.strip("'\"") if isinstance(value, str) else value) \
            is False
    except ValidationError:
        return False


def _named(key: Any) -> bool:
    return isinstance(key, str) and key.upper() == NAME


def _yaml_values(node: Any) -> Iterator[Any]:
    """Every value a YAML document gives the setting: compose's `environment` as a
    mapping or a list of `NAME=value`, a k8s container's `env` entries."""
    if isinstance(node, dict):
        if _named(node.get("name")):  # k8s: {name: ..., value: ...} or valueFrom
            yield node.get("value", "$valueFrom") if "valueFrom" in node else node.get("value")
        for key, value in node.items():
            if _named(key):
                yield value
            yield from _yaml_values(value)
    elif isinstance(node, list):
        for item in node:
            if isinstance(item, str) and _MENTION.match(item):
                name, sep, value = item.partition("=")
                if _named(name):
                    yield value if sep else None  # a bare name passes the shell's value
            else:
                yield from _yaml_values(item)


def _text_values(text: str) -> Iterator[Any]:
    """Every value a non-YAML file (Dockerfile, shell, env file) gives the setting;
    a line that names it in another form counts as on."""
    for line in text.splitlines():
        code = line.strip()
        if code.startswith("#") or not _MENTION.search(code):
            continue
        match = _ASSIGNED.search(code)
        yield match.group("value") if match else None


def setting_values(path: Path, text: str) -> list[Any]:
    """What ``path`` (holding ``text``) sets MEMFLEET_CHAT_STANDIN to, each place."""
    if not _MENTION.search(text):
        return []
    if path.suffix in (".yml", ".yaml"):
        return [v for doc in yaml.safe_load_all(text) for v in _yaml_values(doc)]
    return list(_text_values(text))


def _deploy_files() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*") if p.is_file() and p.suffix != ".md")


def test_no_deploy_file_turns_the_chat_stand_in_on() -> None:
    files = _deploy_files()
    assert len(files) > 20 and DEPLOY / "compose" / "docker-compose.yml" in files
    on = {}
    for path in files:
        try:
            text = path.read_text("utf-8")
        except UnicodeDecodeError:
            continue  # not a configuration file
        values = [v for v in setting_values(path, text) if not _is_off(v)]
        if values:
            on[str(path.relative_to(ROOT))] = values
    assert on == {}, f"{NAME} must stay off in every deploy/ file"


def test_the_setting_is_off_by_default_and_named_as_checked(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(NAME, raising=False)
    assert ApiSettings().chat_standin is False
    monkeypatch.setenv(NAME.lower(), "true")  # any case, as the check assumes
    assert ApiSettings().chat_standin is True


COMPOSE_ENV = "services:\n  api:\n    environment:\n"
K8S_ENV = "spec:\n  containers:\n    - env:\n        - name: MEMFLEET_CHAT_STANDIN\n"


@pytest.mark.parametrize(("name", "text"), [
    ("docker-compose.yml", COMPOSE_ENV + "      MEMFLEET_CHAT_STANDIN: 'true'\n"),
    ("docker-compose.yml", COMPOSE_ENV + "      memfleet_chat_standin: yes\n"),
    ("docker-compose.yml", "x-env: &env\n  MEMFLEET_CHAT_STANDIN: on\nservices:\n  api:\n"
                           "    environment: *env\n"),
    ("docker-compose.yml", COMPOSE_ENV + "      - MEMFLEET_CHAT_STANDIN=1\n"),
    ("docker-compose.yml", COMPOSE_ENV + "      - MEMFLEET_CHAT_STANDIN\n"),
    ("docker-compose.yml", COMPOSE_ENV + "      MEMFLEET_CHAT_STANDIN: ${CHAT:-false}\n"),
    ("docker-compose.yml", COMPOSE_ENV + "      MEMFLEET_CHAT_STANDIN:\n"),
    ("api.yaml", K8S_ENV + "          value: \"true\"\n"),
    ("api.yaml", K8S_ENV + "          valueFrom:\n            secretKeyRef: {name: s, key: k}\n"),
    ("api.Dockerfile", "FROM python\nENV MEMFLEET_CHAT_STANDIN=true\n"),
    ("api.Dockerfile", "FROM python\nENV MEMFLEET_CHAT_STANDIN 1\n"),
    ("gen-secrets", "#!/bin/sh\nexport MEMFLEET_CHAT_STANDIN=True\n"),
    ("api.env", "MEMFLEET_CHAT_STANDIN=\"on\"\n"),
])
def test_the_check_sees_each_way_of_turning_it_on(name: str, text: str) -> None:
    values = setting_values(Path(name), text)
    assert values and not all(_is_off(v) for v in values), values


@pytest.mark.parametrize(("name", "text"), [
    ("docker-compose.yml", COMPOSE_ENV + "      MEMFLEET_CHAT_STANDIN: 'false'\n"),
    ("docker-compose.yml", "# MEMFLEET_CHAT_STANDIN stays off here\nservices: {}\n"),
    ("api.yaml", K8S_ENV + "          value: \"0\"\n"),
    ("api.Dockerfile", "FROM python\n# not MEMFLEET_CHAT_STANDIN=1\n"
                       "ENV MEMFLEET_CHAT_STANDIN=false\n"),
])
def test_the_check_lets_it_be_off_or_mentioned_in_a_comment(name: str, text: str) -> None:
    assert all(_is_off(v) for v in setting_values(Path(name), text))
