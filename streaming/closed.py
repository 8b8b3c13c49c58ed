"""Closed windows out of Spark's aggregated rows: pure Arrow → histograms and counters.

What ``foreachBatch`` receives (one row per window, series, send-time leader and kind, carrying a
histogram encoded by ``streaming.wire``, plus the counter rows) becomes ``WindowHistogram``s
and ``StreamCounters``; no Spark, no I/O, so it is tested on plain Arrow tables. Rows with a
``broker`` come out as cells (one partition under one leader) for ``core.windows.with_rollups``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from core.hdr import HdrLayout, SparseHistogram
from core.windows import SeriesKey, WindowHistogram, WindowSpec
from streaming.counters import StreamCounters
from streaming.state_keys import STAT_PREFIX
from streaming.wire import decode


def closed_windows(
    table: pa.Table, layout: HdrLayout, spec: WindowSpec
) -> tuple[list[WindowHistogram], StreamCounters]:
    """Histograms and counters from one micro-batch's rows: one encoded histogram a row."""
    resolutions_us = spec.resolutions_us
    end_us = pc.cast(table["window_end"], pa.timestamp("us", "UTC")).cast(pa.int64())
    if "broker" not in table.column_names:  # rows without leaders: partition series as they are
        table = table.append_column("broker", pa.array([""] * table.num_rows, pa.string()))
    cols = {
        n: table[n].to_pylist()
        for n in ("resolution", "cluster", "topic", "partition", "kind", "broker", "hist")
    }
    ends = end_us.to_pylist()
    counters: dict[str, dict[Any, int]] = {
        k: {} for k in ("late", "bad", "data_loss", "offsets_reset", "system")
    }
    merged: dict[tuple[str, int, SeriesKey], WindowHistogram] = {}
    for i in range(table.num_rows):
        lost_n, max_us, sum_us, buckets, counts = decode(cols["hist"][i])
        kind = cols["kind"][i]
        if kind.startswith(STAT_PREFIX):
            _, what, *reason = kind.split(":")
            if what == "late":
                key: Any = (cols["cluster"][i], cols["topic"][i], cols["partition"][i])
            elif what == "bad":
                key = reason[0] if reason else "unknown"
            elif what == "system":
                key = (cols["cluster"][i], reason[0] if reason else "unknown")
            else:
                key = (cols["topic"][i], cols["partition"][i])
            counters.setdefault(what, {})
            counters[what][key] = counters[what].get(key, 0) + int(counts.sum())
            continue
        res, window_end_us = cols["resolution"][i], ends[i]
        cluster, topic, partition = cols["cluster"][i], cols["topic"][i], cols["partition"][i]
        series = SeriesKey(cluster, topic, partition, kind, cols["broker"][i] or "")
        hist = SparseHistogram.from_counts(layout, buckets, counts, max_us, sum_us)
        w = WindowHistogram(
            res, window_end_us - resolutions_us[res], window_end_us, series, hist, lost_n
        )
        k = (res, window_end_us, series)
        if k in merged:  # one series' rows of the same window (never from Spark's own keys)
            old = merged[k]
            w = replace(w, hist=old.hist.merge(hist), lost=old.lost + lost_n)
        merged[k] = w
    windows = list(merged.values())
    finest = spec.finest
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
        offsets_reset=counters["offsets_reset"],
        systems=counters["system"],
    )
