"""The suite's generated variants (bench.eval_variants): reproducible, and the same test."""

from __future__ import annotations

import json

from bench.eval_variants import hand_written, render, values_in, variant
from worker.eval.suite import Scenario


def test_the_committed_variants_are_the_generators_output() -> None:
    # Regenerate with `python -m bench.eval_variants` after editing a scenario.
    for path, text in render().items():
        assert path.read_text("utf-8") == text, path.name


def test_a_variant_swaps_a_value_everywhere_it_is_said_and_checked() -> None:
    raw = next(r for r in hand_written() if r["id"] == "update-city")
    made = variant(raw, 1)
    assert made["id"] == "update-city-v1"
    said = json.dumps(made["sessions"])
    assert "Porto" not in said and "Madrid" not in said
    scenario = Scenario.model_validate(made)
    new_city = scenario.expect.active[0].words[0]
    assert new_city in said and scenario.questions[0].answer == new_city
    assert [v for _, v in values_in(made)] != [v for _, v in values_in(raw)]
    assert variant(raw, 1) == made and variant(raw, 2) != made  # seeded
