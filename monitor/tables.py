"""Quantile tables of closed windows, as the demo shows them: one row per series, gated nines."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from core.hdr import REPORTED_QUANTILES, min_samples_for, quantile_label
from core.windows import WindowHistogram


def quantile_table(windows: Iterable[WindowHistogram]) -> list[dict[str, Any]]:
    """Per series: samples, gated quantiles (seconds, None when too few samples), max, lost."""
    rows = []
    for w in sorted(
        windows,
        key=lambda w: (
            w.series.cluster,
            w.series.topic,
            w.series.partition,
            w.series.kind,
            w.window_start_us,
        ),
    ):
        total = w.hist.total
        row: dict[str, Any] = {
            "cluster": w.series.cluster,
            "topic": w.series.topic,
            "partition": w.series.partition,
            "kind": w.series.kind,
            "window": w.resolution,
            "samples": total,
            "max": w.hist.max_us / 1e6,
            "lost": w.lost,
        }
        for q in REPORTED_QUANTILES:
            gated = total >= min_samples_for(q)
            row[quantile_label(q)] = w.hist.value_at_quantile(q) / 1e6 if gated else None
        rows.append(row)
    return rows
