"""The autoscaling run's controller computes replicas the way KEDA and the HPA would
(bench/lib/keda_formula.py), from deploy/k8s/keda.yaml's triggers and behavior."""

from __future__ import annotations

from bench.lib.keda_formula import (
    Behavior,
    History,
    Trigger,
    desired_replicas,
    keda_activation,
    recommendation,
    trigger_replicas,
)

BEHAVIOR = Behavior()  # keda.yaml's


def jobs(value: float) -> Trigger:
    return Trigger("jobs", value, threshold=10, average=True)


def lag(value: float) -> Trigger:
    return Trigger("lag", value, threshold=30, average=False)


def test_each_trigger_asks_for_its_own_count() -> None:
    assert trigger_replicas(2, jobs(85)) == 9  # AverageValue: ceil(85 / 10)
    assert trigger_replicas(4, lag(60)) == 8  # Value: ceil(4 * 60 / 30)
    assert trigger_replicas(4, lag(3)) == 1
    # Within 10% of the target: nothing changes.
    assert trigger_replicas(3, jobs(31)) == 3
    assert trigger_replicas(4, lag(32)) == 4
    assert recommendation(4, [jobs(85), lag(60)]) == 9  # the highest wins


def test_scale_up_is_limited_by_the_policies_and_the_maximum() -> None:
    desired, history = desired_replicas(0.0, 1, [jobs(200)], History(), behavior=BEHAVIOR,
                                        min_replicas=1, max_replicas=20)
    assert desired == 5  # 1 + 4 pods (more than +100%) per minute
    desired, _ = desired_replicas(15.0, desired, [jobs(200)], history, behavior=BEHAVIOR,
                                  min_replicas=1, max_replicas=20)
    assert desired == 5  # the minute's allowance is spent
    desired, _ = desired_replicas(61.0, 5, [jobs(500)], history, behavior=BEHAVIOR,
                                  min_replicas=1, max_replicas=20)
    assert desired == 10  # +100% of the 5 at the period's start
    desired, _ = desired_replicas(0.0, 18, [jobs(1000)], History(), behavior=BEHAVIOR,
                                  min_replicas=1, max_replicas=20)
    assert desired == 20


def test_scale_down_waits_for_the_stabilization_window() -> None:
    history = History()
    current = 8
    for now in (0.0, 15.0):
        current, history = desired_replicas(now, current, [jobs(80)], history,
                                            behavior=BEHAVIOR, min_replicas=1, max_replicas=20)
    assert current == 8
    # The work is gone: the window still holds 8 for five minutes.
    current, history = desired_replicas(30.0, current, [jobs(0)], history, behavior=BEHAVIOR,
                                        min_replicas=1, max_replicas=20)
    assert current == 8
    current, history = desired_replicas(316.0, current, [jobs(0)], history, behavior=BEHAVIOR,
                                        min_replicas=1, max_replicas=20)
    assert current == 4  # then at most 50% a minute
    current, _ = desired_replicas(377.0, current, [jobs(0)], history, behavior=BEHAVIOR,
                                  min_replicas=1, max_replicas=20)
    assert current == 2


def test_keda_wakes_a_fleet_scaled_to_zero_and_lets_it_sleep_after_the_cooldown() -> None:
    assert keda_activation(0, [jobs(1)], 0, behavior=BEHAVIOR) == 1
    assert keda_activation(0, [jobs(0), lag(0)], 0, behavior=BEHAVIOR) == 0
    assert keda_activation(1, [jobs(0)], 299, behavior=BEHAVIOR) is None
    assert keda_activation(1, [jobs(0)], 300, behavior=BEHAVIOR) == 0
