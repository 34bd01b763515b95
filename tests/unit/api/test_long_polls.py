"""The long-lived requests' caps (worker.api.long_polls): the caller's share, then the
process's, each slot given back once however often it is released."""

from __future__ import annotations

import json

import pytest

from worker.api.long_polls import Caps, LongPollRefused, LongPolls
from worker.api.service_auth import Caller

ADA, BOB = Caller(user_id="ada"), Caller(user_id="bob")
KEY = Caller(key_id="0123456789ab", scopes=frozenset({"read"}))


def refused(polls: LongPolls, who: Caller) -> int:
    with pytest.raises(LongPollRefused) as caught:
        polls.admit(who)
    return caught.value.status


def test_a_caller_past_its_share_gets_429_and_another_caller_gets_in() -> None:
    polls = LongPolls("waits", Caps(per_process=10, per_key=3, per_user=2))
    held = [polls.admit(ADA), polls.admit(ADA)]
    assert refused(polls, ADA) == 429
    assert polls.admit(BOB) and polls.open_for(BOB) == 1
    keys = [polls.admit(KEY) for _ in range(3)]
    assert refused(polls, KEY) == 429
    assert polls.total == 6 and len(held + keys) == 5


def test_the_process_past_its_fill_gets_503_but_429_first_for_a_caller_over_its_share(
) -> None:
    polls = LongPolls("waits", Caps(per_process=3, per_key=5, per_user=2))
    polls.admit(ADA), polls.admit(ADA), polls.admit(KEY)
    assert refused(polls, BOB) == 503
    assert refused(polls, ADA) == 429


def test_a_slot_is_given_back_once_and_no_caller_entry_is_kept() -> None:
    polls = LongPolls("streams", Caps(per_process=2, per_key=1, per_user=0))
    slot = polls.admit(KEY)
    slot.release()
    slot.release()  # a second release gives back nothing more
    assert polls.total == 0 and polls.open_for(KEY) == 0 and not polls._open
    with polls.admit(KEY):
        assert refused(polls, KEY) == 429
    assert polls.total == 0
    assert refused(polls, ADA) == 429  # no end user's share of the streams


def test_a_refusal_is_json_in_the_errors_shape_with_retry_after() -> None:
    polls = LongPolls("waits", Caps(per_process=1, per_key=1, per_user=1))
    polls.admit(ADA)
    for who, status, error in ((ADA, 429, "TooManyLongPolls"), (BOB, 503, "LongPollsFull")):
        with pytest.raises(LongPollRefused) as caught:
            polls.admit(who)
        answer = caught.value.response()
        assert answer.status_code == status
        assert int(answer.headers["Retry-After"]) > 0
        body = json.loads(bytes(answer.body))
        assert body["error"] == error and "ada" not in body["detail"]
