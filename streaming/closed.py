"""Closed windows out of Spark's aggregated rows: pure Arrow → histograms and counters.

What ``foreachBatch`` receives (one row per window, series, send-time leader, kind and bucket,
plus the counter rows) becomes ``WindowHistogram``s and ``StreamCounters``; no Spark, no I/O, so
it is tested on plain Arrow tables. Rows with a ``broker`` come out as cells (one partition under
one leader) for ``core.windows.with_rollups``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from core.hdr import HdrLayout, SparseHistogram
from core.windows import SeriesKey, WindowHistogram
from streaming.counters import StreamCounters
from streaming.histograms import STAT_PREFIX


def closed_windows(
    table: pa.Table, layout: HdrLayout, resolutions_us: dict[str, int]
) -> tuple[list[WindowHistogram], StreamCounters]:
    """Histograms and counters from one micro-batch's aggregate rows (Arrow, grouped natively)."""
    end_us = pc.cast(table["window_end"], pa.timestamp("us", "UTC")).cast(pa.int64())
    table = table.set_column(table.schema.get_field_index("window_end"), "window_end", end_us)
    is_stat = pc.starts_with(table["kind"], STAT_PREFIX)
    counters: dict[str, dict[Any, int]] = {k: {} for k in ("late", "bad", "data_loss", "system")}
    for r in table.filter(is_stat).to_pylist():
        _, what, *reason = r["kind"].split(":")
        if what == "late":
            key: Any = (r["cluster"], r["topic"], r["partition"])
        elif what == "bad":
            key = reason[0] if reason else "unknown"
        elif what == "system":
            key = (r["cluster"], reason[0] if reason else "unknown")
        else:
            key = (r["topic"], r["partition"])
        counters.setdefault(what, {})
        counters[what][key] = counters[what].get(key, 0) + int(r["count"])
    if "broker" not in table.column_names:  # rows without leaders: partition series as they are
        table = table.append_column("broker", pa.array([""] * table.num_rows, pa.string()))
    keys = ["resolution", "window_end", "cluster", "topic", "partition", "kind", "broker"]
    grouped = (
        table.filter(pc.invert(is_stat))
        .group_by(keys, use_threads=False)
        .aggregate(
            [
                ("bucket", "list"),
                ("count", "list"),
                ("max_us", "max"),
                ("sum_us", "sum"),
                ("lost", "sum"),
            ]
        )
    )
    windows = []
    cols = {
        name: grouped[name].to_pylist() for name in (*keys, "max_us_max", "sum_us_sum", "lost_sum")
    }
    buckets, counts = grouped["bucket_list"], grouped["count_list"]
    for i in range(grouped.num_rows):
        res, window_end_us = cols["resolution"][i], cols["window_end"][i]
        hist = SparseHistogram.from_counts(
            layout,
            buckets[i].values.to_numpy(zero_copy_only=False),
            counts[i].values.to_numpy(zero_copy_only=False),
            cols["max_us_max"][i],
            cols["sum_us_sum"][i] or 0,
        )
        series = SeriesKey(
            cols["cluster"][i],
            cols["topic"][i],
            cols["partition"][i],
            cols["kind"][i],
            cols["broker"][i] or "",
        )
        windows.append(
            WindowHistogram(
                res,
                window_end_us - resolutions_us[res],
                window_end_us,
                series,
                hist,
                int(cols["lost_sum"][i] or 0),
            )
        )
    finest = min(resolutions_us, key=lambda r: resolutions_us[r])
    echoes: dict[Any, int] = {}
    lost: dict[Any, int] = {}
    overflow: dict[SeriesKey, int] = {}
    for w in windows:
        if w.resolution != finest:
            continue
        if w.series.kind == "e2e":
            key = (w.series.cluster, w.series.topic, w.series.partition)
            echoes[key] = echoes.get(key, 0) + w.hist.total
            lost[key] = lost.get(key, 0) + w.lost
        if w.hist.overflow:
            s = replace(w.series, broker="")  # counted per partition series, as exported
            overflow[s] = overflow.get(s, 0) + w.hist.overflow
    windows.sort(key=lambda w: w.sort_key)
    return windows, StreamCounters(
        echoes=echoes,
        lost=lost,
        late=counters["late"],
        overflow=overflow,
        bad=counters["bad"],
        data_loss=counters["data_loss"],
        systems=counters["system"],
    )
