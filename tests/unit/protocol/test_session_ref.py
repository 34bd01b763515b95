"""worker.protocol.keys.SessionRef: the pair (user_id, session_id), its key and its keys."""

import pytest

from worker.protocol.keys import SessionRef, user_tag


@pytest.mark.parametrize("user,session", [
    ("alice", "1"), ("a}:b", "c"), ("a", "b}:c"), ("{x}", "{y}"), ("%7D", "%"),
    ("ü 🙂", "s:1:2"), ("", ""),
])
def test_a_key_reads_back_as_its_pair(user: str, session: str) -> None:
    ref = SessionRef(user, session)
    assert SessionRef.parse(ref.key) == ref


def test_pairs_that_concatenate_alike_get_different_keys() -> None:
    pairs = [("a}:b", "c"), ("a", "b}:c"), ("a:b", "c"), ("a", "b:c"), ("a%7D", "c")]
    assert len({SessionRef(u, s).key for u, s in pairs}) == len(pairs)


def test_one_users_keys_share_a_cluster_hash_tag() -> None:
    tag = user_tag("a}{b")
    assert all(SessionRef("a}{b", s).key.startswith(tag) for s in ("1", "2"))
    # Redis Cluster hashes what lies between the first '{' and the next '}'.
    inner = tag[1:tag.index("}")]
    assert "{" not in inner and tag.endswith("}") and tag.count("}") == 1


@pytest.mark.parametrize("bad", ["alice:1", "{alice", "{alice}1", ""])
def test_a_string_that_is_no_session_key_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        SessionRef.parse(bad)


def test_a_session_carries_its_keys() -> None:
    ref = SessionRef("a{b}%c", "s:1")
    tail = "{a%7Bb%7D%25c}:s:1"  # docs/protocol.md's example
    assert (ref.handover_key, ref.meta_key, ref.backlog_key, ref.queued_key) == ref.state_keys
    assert ref.state_keys == ("memfleet:handover:" + tail, "memfleet:handover-meta:" + tail,
                              "memfleet:backlog:" + tail, "memfleet:queued:" + tail)
    assert ref.lock_key == "memory-task-lock:" + tail
    assert ref.chat_session_key == "chat:session:" + tail
