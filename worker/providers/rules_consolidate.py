"""The offline rules provider's consolidation: one decision per candidate, by slot.

Each candidate fact text and each of its neighbours is read back into the slot it
fills (``rules_patterns.parse_fact``); the decision follows from how the slots
meet: the same fact again changes nothing, a new value of a one-value slot
("Lives in Paris" beside "Lives in Berlin") updates it, a switch or a move updates
the old tool's or place's fact, a negation ("No longer uses Vim", "Is no longer
vegetarian") retracts what it names. Judged only against the candidate's own
neighbours, so every target is one of them.
"""

from __future__ import annotations

from collections.abc import Sequence

from worker.protection.cpu_budget import Checkpoint, no_deadline
from worker.providers.rules_patterns import Slot, clean_text, norm, parse_fact
from worker.providers.wire import (
    Candidate,
    ConsolidationAnswer,
    ConsolidationRequest,
    Decision,
    Neighbor,
)

Neighbours = list[tuple[Neighbor, Slot]]

# The one-value slots a move can change, and the fact text of their new value.
_MOVABLE = {"lives in": "Lives in {}", "works at": "Works at {}", "works as": "Works as {}"}
# Slots whose value flips: "Dislikes jazz" replaces "Likes jazz", "Eats meat" "Does not eat meat".
_OPPOSITE = {"likes": "dislikes", "dislikes": "likes", "eats": "avoids", "avoids": "eats"}


def _latest(neighbours: Sequence[Neighbor]) -> int:
    # The batch's own earlier candidates carry today's date and the highest ids,
    # so this picks the freshest statement of a slot.
    return max(neighbours, key=lambda n: (n.observed_at, n.id)).id


def _uses(slot: Slot) -> str | None:
    """The tool a fact says is in use ("Uses X", "Works with X" or "Uses X instead of Y")."""
    return norm(slot.value) if slot.kind in ("uses", "switch") else None


def _same(slot: Slot, other: Slot) -> bool:
    if slot.kind != other.kind or slot.key != other.key:
        return False
    return norm(slot.value) == norm(other.value) and norm(slot.old) == norm(other.old)


def _says_it(slot: Slot, other: Slot) -> bool:
    """Whether a stored fact says what a forget request (or a negation) names: the same
    slot and value ("Lives in Oslo"), the same tool in use, or the same fact."""
    if slot.kind == "uses":
        return _uses(other) == norm(slot.value)
    return _same(slot, other) if slot.kind != "other" else norm(slot.value) == norm(other.value)


def _switched(number: int, slot: Slot, neighbours: Neighbours) -> Decision:
    """ "Uses B instead of A" (or a move from tool A): the old tool's fact becomes B's,
    in its own words ("Works with A": "Works with B")."""
    new, old = norm(slot.value), norm(slot.old)
    using_old = [(n, s) for n, s in neighbours if _uses(s) == old]
    using_new = [n for n, s in neighbours if _uses(s) == new]
    if using_old and using_new:
        # The new tool is already recorded; only the old one is stale.
        return Decision(candidate=number, event="DELETE",
                        target=_latest([n for n, _ in using_old]))
    if using_old:
        latest, stored = max(using_old, key=lambda pair: (pair[0].observed_at, pair[0].id))
        verb = "Works with" if stored.key == "works with" else "Uses"
        return Decision(candidate=number, event="UPDATE", target=latest.id,
                        text=f"{verb} {slot.value}")
    if using_new:
        return Decision(candidate=number, event="NONE", target=_latest(using_new))
    return Decision(candidate=number, event="ADD", text=f"Uses {slot.value}")


def _holds(slot: Slot, value: str) -> bool:
    """Whether a neighbour's slot says the user is at ``value``: lives, works there or as
    it, or moved to it."""
    movable = (slot.kind == "single" and slot.key in _MOVABLE) or slot.kind == "move"
    return movable and norm(slot.value) == value


def _moved(number: int, slot: Slot, text: str, neighbours: Neighbours) -> Decision:
    """ "Moved from A to B" is said of places and of tools alike: a switch when A is a tool
    in use, the new value of what A was ("Lives in A": "Lives in B"), else kept as said."""
    new, old = norm(slot.value), norm(slot.old)
    if any(_uses(s) == old for _, s in neighbours):
        return _switched(number, slot, neighbours)
    at_old = [(n, s) for n, s in neighbours if _holds(s, old)]
    at_new = [n for n, s in neighbours if _holds(s, new)]
    if at_old and at_new:
        return Decision(candidate=number, event="DELETE", target=_latest([n for n, _ in at_old]))
    if at_old:
        latest, stored = max(at_old, key=lambda pair: (pair[0].observed_at, pair[0].id))
        renamed = _MOVABLE[stored.key].format(slot.value) if stored.kind == "single" else text
        return Decision(candidate=number, event="UPDATE", target=latest.id, text=renamed)
    if at_new:
        return Decision(candidate=number, event="NONE", target=_latest(at_new))
    return Decision(candidate=number, event="ADD")  # the caller gives the cleaned text


def _decide_one(candidate: Candidate) -> Decision:
    number = candidate.candidate
    text = clean_text(candidate.text)
    if not norm(text):
        return Decision(candidate=number, event="NONE")
    add_text = text if text != candidate.text else None
    neighbours = [(n, parse_fact(n.text)) for n in candidate.neighbors]
    if candidate.forget:
        named = [n for n, s in neighbours
                 if norm(n.text) == norm(text) or _says_it(parse_fact(text), s)]
        if named:
            return Decision(candidate=number, event="DELETE", target=_latest(named))
        return Decision(candidate=number, event="NONE")  # nothing stored says it

    duplicates = [n for n, _ in neighbours if norm(n.text) == norm(text)]
    if duplicates:
        return Decision(candidate=number, event="NONE", target=_latest(duplicates))

    slot = parse_fact(text)
    if slot.kind == "switch":
        return _switched(number, slot, neighbours)
    if slot.kind == "move":
        decision = _moved(number, slot, text, neighbours)
        return decision.model_copy(update={"text": add_text}) if decision.event == "ADD" \
            else decision

    if slot.kind == "uses":  # "Uses X instead of Y" already says X is in use
        restated = [n for n, s in neighbours if _uses(s) == norm(slot.value)]
    else:
        restated = [n for n, s in neighbours if _same(slot, s)]
    if restated:
        return Decision(candidate=number, event="NONE", target=_latest(restated))

    if slot.kind in ("stopped", "ended"):
        # A negation retracts what it names ("No longer lives in Oslo": "Lives in Oslo");
        # like a stopped tool, it is not kept on its own.
        if slot.kind == "stopped":
            named = [n for n, s in neighbours if _uses(s) == norm(slot.value)]
        else:
            ended = parse_fact(slot.value)
            named = [n for n, s in neighbours if _says_it(ended, s)]
        if named:
            return Decision(candidate=number, event="DELETE", target=_latest(named))
        return Decision(candidate=number, event="NONE")  # nothing recorded to retract

    if slot.kind == "single":
        rivals = [n for n, s in neighbours if s.kind == "single" and s.key == slot.key]
    elif slot.kind in _OPPOSITE:
        rivals = [n for n, s in neighbours
                  if s.kind == _OPPOSITE[slot.kind] and norm(s.value) == norm(slot.value)]
    else:
        rivals = []
    # A fact said again after its negation was kept (an import, a correction) replaces it.
    rivals += [n for n, s in neighbours if s.kind == "ended" and norm(s.value) == norm(text)]
    if rivals:
        return Decision(candidate=number, event="UPDATE", target=_latest(rivals), text=text)
    return Decision(candidate=number, event="ADD", text=add_text)


def decide(request: ConsolidationRequest,
           checkpoint: Checkpoint = no_deadline) -> ConsolidationAnswer:
    """One decision per candidate, judged only against that candidate's own neighbours."""
    decisions = []
    for candidate in request.candidates:
        checkpoint()
        decisions.append(_decide_one(candidate))
    return ConsolidationAnswer(decisions=tuple(decisions))
