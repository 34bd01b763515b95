"""The user's portrait's routes as Calls, and their answers (docs/portrait.md):

    shown = api.portrait("ada")                 # .state, .portrait (None but "current")
    same = api.portrait("ada", known_tag=shown.tag)   # None: unchanged (304)
    api.remove_portrait("ada")                  # none is made until asked again
    api.refresh_portrait("ada")                 # asked again: a refresh is queued
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast

import httpx

from worker.client.memory_api_models import _bool, _int, _obj, _str, _time
from worker.client.memory_api_wire import Call, segment

NOT_MODIFIED = 304
PortraitState = Literal["current", "none", "removed", "off"]
_STATES = ("current", "none", "removed", "off")


@dataclass(frozen=True, slots=True)
class PortraitText:
    text: str
    version: int
    fact_count: int
    model: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Portrait:
    """The user's portrait as the API shows it: ``state`` current (``portrait`` is it),
    none (not made yet), removed (by the user; none is made until asked again), off
    (memory is off). ``tag``: the ETag, for ``known_tag``."""

    user_id: str
    state: PortraitState
    portrait: PortraitText | None
    tag: str

    @classmethod
    def parse(cls, value: Any, tag: str) -> Portrait:
        d = _obj(value)
        state = _str(d["state"])
        if state not in _STATES:
            raise ValueError("an unknown portrait state")
        shown = d["portrait"]
        text = None if shown is None else PortraitText(
            text=_str(_obj(shown)["text"]), version=_int(shown["version"]),
            fact_count=_int(shown["fact_count"]), model=_str(shown["model"]),
            created_at=_time(shown["created_at"]))
        return cls(user_id=_str(d["user_id"]), state=cast(PortraitState, state),
                   portrait=text, tag=tag)


def _path(user_id: str) -> str:
    return f"/users/{segment(user_id, 'user_id')}/portrait"


def _portrait_or_none(response: httpx.Response) -> Portrait | None:
    if response.status_code == NOT_MODIFIED:
        return None
    return Portrait.parse(response.json(), response.headers.get("etag", "").strip('"'))


def portrait(user_id: str, known_tag: str | None) -> Call[Portrait | None]:
    """``known_tag``: sent as If-None-Match; the answer is None when it is current."""
    headers = None if known_tag is None else {"If-None-Match": f'"{known_tag}"'}
    return Call("portrait", "GET", _path(user_id), _portrait_or_none, headers=headers,
                answers=(NOT_MODIFIED,))


def remove_portrait(user_id: str) -> Call[int | None]:
    def removed(response: httpx.Response) -> int | None:
        version = _obj(response.json())["removed_version"]
        return None if version is None else _int(version)

    return Call("remove_portrait", "DELETE", _path(user_id), removed)


def refresh_portrait(user_id: str) -> Call[bool]:
    return Call("refresh_portrait", "POST", _path(user_id) + "/refresh",
                lambda r: _bool(_obj(r.json())["queued"]))
