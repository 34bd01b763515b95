"""KEDA's replica arithmetic, as pure functions of the metrics and the recent past.

KEDA hands each trigger of deploy/k8s/keda.yaml to the HorizontalPodAutoscaler as
an external metric; the HPA turns the metrics into a replica count. This module
follows the HPA controller's own steps (kubernetes pkg/controller/podautoscaler,
replica_calculator.go and horizontal.go), so that a run on one machine scales
the way the cluster would:

1. per trigger, a count: AverageValue ``ceil(metric / threshold)``, Value
   ``ceil(current * metric / threshold)``; a trigger within the tolerance of its
   target keeps the current count;
2. the highest count over the triggers (the recommendation, unclamped);
3. stabilization: scale up to the lowest recommendation of the scale-up window,
   down to the highest of the scale-down window;
4. the rate policies (the one allowing the larger change, selectPolicy Max),
   counted from the replicas the period started with, then min/max replicas.

Between 0 and 1 replica KEDA decides itself (``keda_activation``).

The durations are parameters: a short run divides KEDA's and the HPA's times by
one factor (``Behavior.scaled``) and says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

# The HPA's default --horizontal-pod-autoscaler-tolerance.
TOLERANCE = 0.1


@dataclass(frozen=True, slots=True)
class Trigger:
    """One trigger's metric as read, and its threshold."""

    name: str
    value: float
    threshold: float
    average: bool  # metricType AverageValue (per replica); False: Value


@dataclass(frozen=True, slots=True)
class Behavior:
    """The ScaledObject's timing and advanced.horizontalPodAutoscalerConfig.behavior;
    the defaults are deploy/k8s/keda.yaml's."""

    polling_interval_s: float = 15.0
    cooldown_s: float = 300.0  # KEDA: 1 -> 0 after this long with no active trigger
    up_window_s: float = 0.0
    up_percent: int = 100
    up_pods: int = 4
    up_period_s: float = 60.0
    down_window_s: float = 300.0
    down_percent: int = 50
    down_period_s: float = 60.0

    def scaled(self, factor: float) -> Behavior:
        """Every duration divided by ``factor``; the counts and percentages kept."""
        return replace(
            self, polling_interval_s=self.polling_interval_s / factor,
            cooldown_s=self.cooldown_s / factor, up_window_s=self.up_window_s / factor,
            up_period_s=self.up_period_s / factor, down_window_s=self.down_window_s / factor,
            down_period_s=self.down_period_s / factor)


@dataclass(frozen=True, slots=True)
class History:
    """What the HPA remembers between two polls: its recent recommendations and
    the replica changes it made, each with its time (seconds, any clock)."""

    recommendations: tuple[tuple[float, int], ...] = ()
    changes: tuple[tuple[float, int], ...] = ()  # signed: +2 is two replicas added


def trigger_replicas(current: int, trigger: Trigger, tolerance: float = TOLERANCE) -> int:
    """The count one trigger asks for, ``current`` replicas running (at least 1)."""
    current = max(current, 1)  # from 0 KEDA activates first; the HPA never sees 0
    if trigger.average:
        # The HPA compares the per-replica average to the threshold...
        ratio = trigger.value / (trigger.threshold * current)
        if abs(ratio - 1.0) <= tolerance:
            return current
        # ...but asks for the total over the threshold, not current * ratio.
        return math.ceil(trigger.value / trigger.threshold)
    ratio = trigger.value / trigger.threshold
    if abs(ratio - 1.0) <= tolerance:
        return current
    return math.ceil(ratio * current)


def recommendation(current: int, triggers: Sequence[Trigger],
                   tolerance: float = TOLERANCE) -> int:
    """The highest count over the triggers, before stabilization and limits."""
    return max(trigger_replicas(current, t, tolerance) for t in triggers)


def _changed_within(changes: Sequence[tuple[float, int]], now: float, period_s: float,
                    up: bool) -> int:
    """Replicas added (``up``) or removed within the period, as a positive count."""
    return sum(abs(change) for at, change in changes
               if at > now - period_s and (change > 0) == up)


def desired_replicas(
    now: float, current: int, triggers: Sequence[Trigger], history: History, *,
    behavior: Behavior, min_replicas: int, max_replicas: int, tolerance: float = TOLERANCE,
) -> tuple[int, History]:
    """The replica count the HPA sets at ``now`` and what it remembers for the next
    poll; ``current`` is the count it set last (at least 1: see keda_activation)."""
    current = max(current, 1)
    wanted = recommendation(current, triggers, tolerance)
    # The window holds the current count when it starts empty (horizontal.go does so);
    # a past recommendation counts when it is strictly inside the window, as there.
    prior = history.recommendations or ((now, current),)
    recommendations = (*prior, (now, wanted))
    up_floor = min([wanted, *(r for at, r in prior if at > now - behavior.up_window_s)])
    down_ceiling = max([wanted, *(r for at, r in prior if at > now - behavior.down_window_s)])
    stabilized = min(max(current, up_floor), down_ceiling)

    desired = stabilized
    if stabilized > current:
        start = current - _changed_within(history.changes, now, behavior.up_period_s, up=True)
        limit = max(start + behavior.up_pods,
                    math.ceil(start * (1 + behavior.up_percent / 100)))
        desired = min(stabilized, max(limit, current), max_replicas)
    elif stabilized < current:
        start = current + _changed_within(history.changes, now, behavior.down_period_s, up=False)
        # Truncated, as the HPA's int32() conversion does.
        limit = int(start * (1 - behavior.down_percent / 100))
        desired = max(stabilized, min(limit, current), min_replicas)
    desired = min(max(desired, min_replicas), max_replicas)

    keep = max(behavior.up_window_s, behavior.down_window_s, behavior.up_period_s,
               behavior.down_period_s)
    changes = history.changes + (((now, desired - current),) if desired != current else ())
    return desired, History(
        recommendations=tuple((at, r) for at, r in recommendations if at >= now - keep),
        changes=tuple((at, c) for at, c in changes if at > now - keep),
    )


def keda_activation(current: int, triggers: Sequence[Trigger], idle_for_s: float, *,
                    behavior: Behavior, activation_threshold: float = 0.0) -> int | None:
    """KEDA's own step between 0 and 1 replica (minReplicaCount 0 only): 1 when a
    trigger is above its activation threshold at 0 replicas, 0 when none has been
    for the cooldown; None when the HPA decides."""
    active = any(t.value > activation_threshold for t in triggers)
    if current == 0:
        return 1 if active else 0
    if not active and idle_for_s >= behavior.cooldown_s:
        return 0
    return None
