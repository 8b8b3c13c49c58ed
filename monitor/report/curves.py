"""Latency-by-percentile curves, pure: which windows, merged how, read at which percentiles.

Windows are merged (bucket counts added) before any quantile is read; a curve stops at the
highest percentile its sample count supports, then shows the exact max.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from core.hdr import SparseHistogram
from core.windows import ALL_PARTITIONS, WindowHistogram

#: Percentiles on the x axis: 0 % then 90 %, 99 % … 99.9999 % (1/(1-p) log scale).
CURVE_PERCENTILES: tuple[float, ...] = tuple(
    sorted({0.0} | {1 - 10 ** (-k / 8) for k in range(1, 8 * 6 + 1)})
)
TICKS: tuple[tuple[float, str], ...] = (
    (0.0, "0%"), (0.9, "90%"), (0.99, "99%"), (0.999, "99.9%"), (0.9999, "99.99%"),
    (0.99999, "99.999%"), (0.999999, "99.9999%"),
)  # fmt: skip
#: The x axis reaches at least this far (1/(1-p) = 10 is p90).
MIN_X_MAX = 10.0


def select(
    windows: Iterable[WindowHistogram],
    cluster: str | None = None,
    topic: str | None = None,
    partition: str | None = None,
    kind: str | None = None,
) -> Iterator[WindowHistogram]:
    """Windows matching the filters (None matches anything; partition 'all' matches all), as
    they come."""
    for w in windows:
        s = w.series
        if cluster is not None and s.cluster != cluster:
            continue
        if topic is not None and s.topic != topic:
            continue
        if partition not in (None, ALL_PARTITIONS) and s.partition != partition:
            continue
        if kind is not None and s.kind != kind:
            continue
        yield w


def merge_curves(
    windows: Iterable[WindowHistogram], by: str, partition: str | None
) -> tuple[dict[str, WindowHistogram], int]:
    """(label → merged window, windows merged): per series (partitions merged unless one is
    chosen) or per window; merged as they come, so the windows need not all be held."""
    merged: dict[str, WindowHistogram] = {}
    n = 0
    for w in windows:
        s = w.series
        if by == "window":
            label = datetime.fromtimestamp(w.window_start_us / 1e6, tz=UTC).strftime("%H:%M:%S")
        else:
            part = s.partition if partition not in (None, ALL_PARTITIONS) else ALL_PARTITIONS
            label = f"{s.cluster}/{s.topic}/{part} {s.kind}"
        acc = merged.get(label)
        merged[label] = w if acc is None else acc.merge(w)
        n += 1
    return dict(sorted(merged.items())), n


def percentile_curve(hist: SparseHistogram) -> list[tuple[float, float]]:
    """(percentile, latency seconds) points up to the six nines the data supports, then the max."""
    total = hist.total
    points = []
    for p in CURVE_PERCENTILES:
        if p > 0 and 1 / (1 - p) > total:
            break
        points.append((p, hist.value_at_quantile(p) / 1e6))
    points.append((1.0, hist.max_us / 1e6))
    return points


def curve_data(curves: dict[str, WindowHistogram], title: str) -> dict[str, Any]:
    """What a report shows, as data: per curve its sample count and (percentile, seconds) points."""
    return {
        "title": title,
        "curves": {
            label: {"samples": w.hist.total, "points": percentile_curve(w.hist)}
            for label, w in curves.items()
        },
    }


def x_positions(points: Sequence[tuple[float, float]]) -> tuple[list[float], float]:
    """Each point's x on the 1/(1-p) log axis, and the max's: one decade past the last point."""
    body = [p for p, _ in points if p < 1.0]
    max_x = (1 / (1 - body[-1]) if body else 1.0) * 10
    return [max_x if p >= 1.0 else 1 / (1 - p) for p, _ in points], max_x


def x_ticks(x_max: float) -> list[tuple[float, str]]:
    """Tick positions and labels up to ``x_max``, where the max is drawn."""
    ticks = [(1 / (1 - p), name) for p, name in TICKS if 1 / (1 - p) <= x_max]
    return [*ticks, (x_max, "max")]
