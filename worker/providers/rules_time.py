"""The rules provider's reading of time and of the relationship with the agent.

Pure functions over a clause and the conversation's date: when a stated fact
began ("I moved to Lisbon last month"), temporary states and plans that stop
being true by themselves ("I'm in Paris this week", "I'm flying to Tokyo on
Friday"), and what the user says about this assistant in particular ("you can
call me Sunny"). Dates come out absolute, as the wire format asks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

from worker.providers.wire import Category

_FLAGS = re.IGNORECASE
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_UNITS = {"day": 1, "week": 7}

_AGO = re.compile(r"\b(?P<n>\d+|a|an|one|two|three)\s+(?P<unit>day|week|month|year)s?\s+ago\b",
                  _FLAGS)
_LAST = re.compile(r"\blast\s+(?P<unit>week|month|year)\b", _FLAGS)
_YESTERDAY = re.compile(r"\byesterday\b", _FLAGS)
_SINCE_YEAR = re.compile(r"\b(?:since|in)\s+(?P<y>(?:19|20)\d{2})\b", _FLAGS)
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3}


@dataclass(frozen=True, slots=True)
class Dated:
    """A fact the rules read with its time, ready for the wire."""

    text: str
    category: Category
    importance: int
    valid_to: str | None = None
    expires_at: str | None = None


def _months_back(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 - months
    return date(index // 12, index % 12 + 1, 1)


def valid_from_in(clause: str, today: date) -> str | None:
    """When what the clause states began, as an absolute date, month or year."""
    if _YESTERDAY.search(clause):
        return (today - timedelta(days=1)).isoformat()
    if match := _AGO.search(clause):
        raw = match["n"].casefold()
        n = _NUMBERS.get(raw) or int(raw)
        unit = match["unit"].casefold()
        if unit in _UNITS:
            return (today - timedelta(days=n * _UNITS[unit])).isoformat()
        if unit == "month":
            return _months_back(today, n).isoformat()[:7]
        return str(today.year - n)
    if match := _LAST.search(clause):
        unit = match["unit"].casefold()
        if unit == "week":
            return (today - timedelta(days=7)).isoformat()
        if unit == "month":
            return _months_back(today, 1).isoformat()[:7]
        return str(today.year - 1)
    if (match := _SINCE_YEAR.search(clause)) and int(match["y"]) <= today.year:
        return match["y"]
    return None


_STAY = re.compile(
    r"\b(?:i'm|i\s+am|im)\s+(?:in|staying\s+in|visiting)\s+(?P<v>[A-Z][\w' -]{0,60}?)\s+"
    r"(?:this|for\s+the)\s+(?P<span>week|weekend)$", _FLAGS)
_TRIP = re.compile(
    r"\b(?:i'm|i\s+am|im)\s+(?:going|flying|travelling|traveling|driving|heading)\s+to\s+"
    r"(?P<v>[\w' -]{1,60}?)\s+(?:on\s+|this\s+|next\s+)?(?P<day>tomorrow|" +
    "|".join(_WEEKDAYS) + r")$", _FLAGS)


def _next_weekday(today: date, name: str, *, strictly_after: bool = True) -> date:
    ahead = (_WEEKDAYS.index(name) - today.weekday()) % 7
    return today + timedelta(days=ahead or (7 if strictly_after else 0))


def temporary_in(clause: str, today: date) -> Dated | None:
    """A stay or a trip with an end: the fact holds until then and expires after it."""
    if match := _STAY.match(clause.strip()):
        until = today + timedelta(days=6 - today.weekday())  # the coming Sunday
        after = (until + timedelta(days=1)).isoformat()
        return Dated(f"Is in {match['v'].strip()} until {until.isoformat()}", "event", 4,
                     valid_to=after, expires_at=after)
    if match := _TRIP.search(clause.strip()):
        day_name = match["day"].casefold()
        day = (today + timedelta(days=1) if day_name == "tomorrow"
               else _next_weekday(today, day_name))
        after = (day + timedelta(days=1)).isoformat()
        return Dated(f"Plans to go to {match['v'].strip()} on {day.isoformat()}", "event", 6,
                     valid_to=after, expires_at=after)
    return None


_RELATIONSHIP: tuple[tuple[re.Pattern[str], str, Category, int], ...] = (
    (re.compile(r"\byou\s+can\s+call\s+me\s+(?P<v>[A-Z][\w'-]{0,40})$", _FLAGS),
     "Wants this assistant to call them {v}", "preference", 6),
    (re.compile(r"\bi\s+(?:like|love)\s+(?:it\s+)?when\s+you\s+(?P<v>.{1,80})$", _FLAGS),
     "Likes it when this assistant {v}", "preference", 5),
    (re.compile(r"\bour\s+(?P<thing>running\s+joke|ritual|tradition)\s+is\s+(?P<v>.{1,80})$",
                _FLAGS),
     "Shares a {thing} with this assistant: {v}", "general", 4),
)


def relationship_in(clause: str) -> tuple[str, Category, int] | None:
    """What the user says about their relationship with this assistant."""
    for pattern, template, category, importance in _RELATIONSHIP:
        if match := pattern.search(clause.strip()):
            values = {k: _third_person(v.strip().rstrip(".!"))
                      for k, v in match.groupdict().items()}
            return template.format(**values), category, importance
    return None


_FIRST_PERSON = {"me": "them", "my": "their", "i": "they", "myself": "themselves"}


def _third_person(value: str) -> str:
    return re.sub(r"\b(me|my|i|myself)\b", lambda m: _FIRST_PERSON[m[1].casefold()], value,
                  flags=_FLAGS)
