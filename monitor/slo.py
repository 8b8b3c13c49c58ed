"""SLO evaluation, pure: an SLA's objectives against closed windows, for the demo and ``nines slo``.

Two questions, one selection of series: *is the objective met right now* (the latest closed window
of its resolution, the worst series decides, as the rendered alert rules do) and *how much of the
span attained it* (the windows merged, bucket counts added, never averaged quantiles). No I/O and
no rendering: callers read the archive or the stream job and draw the tables.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, TypedDict

from core.hdr import min_samples_for, quantile_label
from core.sla import Objective, SlaConfig
from core.units import format_duration
from core.windows import ALL_PARTITIONS, SeriesKey, WindowHistogram

State = Literal["ok", "BREACH", "no data"]


class LiveStatus(TypedDict):
    """One quantile or max objective judged on the latest closed window (seconds)."""

    name: str
    objective: str
    worst: float | None
    state: State


class Attainment(TypedDict, total=False):
    """One objective over a span: ``value`` against ``target``; ``met`` is None without data."""

    objective: str
    samples: int
    target: str
    value: float | int | None
    met: bool | None


def selects(objective: Objective, series: SeriesKey) -> bool:
    """Whether a per-partition series counts for an objective (topic merges would count twice)."""
    return (
        series.kind == objective.kind
        and series.partition != ALL_PARTITIONS
        and (objective.cluster is None or series.cluster == objective.cluster)
        and (objective.topic is None or series.topic == objective.topic)
        and (objective.partition is None or series.partition == objective.partition)
    )


def live_status(
    sla: SlaConfig, latest: Mapping[str, Sequence[WindowHistogram]]
) -> list[LiveStatus]:
    """Each quantile or max objective against the latest closed window of its resolution.

    Like the rendered rules, the worst matching series decides (``max by``, never an average);
    a quantile is only judged when the window holds enough samples for it.
    """
    out: list[LiveStatus] = []
    for o in sla.objectives:
        if o.max is None and (o.quantile is None or o.threshold is None):
            continue  # loss and liveness objectives live in Prometheus only
        windows = [w for w in latest.get(format_duration(o.window), []) if selects(o, w.series)]
        if o.max is not None:
            limit, stat = o.max, "max"
            values = [w.hist.max_us / 1e6 for w in windows if w.hist.total]
        else:
            q = float(o.quantile or 0)
            limit, stat = float(o.threshold or 0), quantile_label(q)
            values = [
                w.hist.value_at_quantile(q) / 1e6
                for w in windows
                if w.hist.total >= min_samples_for(q)
            ]
        worst = max(values, default=None)
        state: State = "no data" if worst is None else ("BREACH" if worst > limit else "ok")
        out.append(
            {
                "name": o.name,
                "objective": f"{o.kind} {stat} <= {limit:g}s per {format_duration(o.window)}",
                "worst": worst,
                "state": state,
            }
        )
    return out


def attainment(objective: Objective, windows: Iterable[WindowHistogram]) -> Attainment:
    """One objective's attainment over the merged windows it selects."""
    return attainments([objective], windows)[0]


def attainments(
    objectives: Sequence[Objective], windows: Iterable[WindowHistogram]
) -> list[Attainment]:
    """Each objective's attainment, in one pass that keeps one merged window per objective: a
    span of any length (``streaming.archive_read.iter_windows``) costs no more than an hour."""
    merged: list[WindowHistogram | None] = [None] * len(objectives)
    for w in windows:
        for i, o in enumerate(objectives):
            if selects(o, w.series):
                acc = merged[i]
                merged[i] = w if acc is None else acc.merge(w)
    return [_judged(o, m) for o, m in zip(objectives, merged, strict=True)]


def _judged(objective: Objective, merged: WindowHistogram | None) -> Attainment:
    if merged is None:
        return {"objective": objective.name, "samples": 0, "value": None, "met": None}
    h = merged.hist
    target: str
    value: float | int
    met: bool
    if objective.threshold is not None:
        good = h.count_at_or_below(int(objective.threshold * 1e6))
        value = good / h.total if h.total else math.nan
        goal = objective.objective if objective.objective is not None else objective.quantile
        goal = float(goal or 0)  # a threshold always comes with a quantile (core.sla)
        target, met = f"{goal:.6g} <= {objective.threshold * 1e3:g}ms", value >= goal
    elif objective.max is not None:
        value = h.max_us / 1e6
        target, met = f"max <= {objective.max:g}s", value <= objective.max
    elif objective.loss_ratio is not None:
        value = merged.lost / h.total if h.total else math.nan
        target, met = f"loss <= {objective.loss_ratio:g}", value <= objective.loss_ratio
    else:
        value = h.total
        target, met = "echoes arriving", h.total > 0
    return {
        "objective": objective.name,
        "samples": h.total,
        "target": target,
        "value": value,
        "met": met,
    }
