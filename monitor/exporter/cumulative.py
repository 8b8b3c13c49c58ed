"""Cumulative histograms of each series since the exporter started: classic ``le`` and native.

A collector (``render`` reads it): it only updates its own state, under the renderer's lock, and
bumps ``generation`` whenever what it exports changes. Each series' exposition lines (text and
protobuf) are rendered when a window adds to it, so a scrape only joins them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.utils import floatToGoString

from core.hdr import SparseHistogram
from core.windows import SeriesKey, WindowHistogram
from monitor.exporter import protobuf, text
from monitor.exporter.contract import series_key
from monitor.exporter.native import rebin


@dataclass
class _Histograms:
    """Cumulative ``le`` buckets, count and sum of each series since the exporter started."""

    buckets: dict[SeriesKey, list[int]] = field(default_factory=dict)
    count: dict[SeriesKey, int] = field(default_factory=dict)
    sum_s: dict[SeriesKey, float] = field(default_factory=dict)
    #: each series' exposition lines, rendered when a window adds to it (a scrape only joins)
    lines: dict[SeriesKey, str] = field(default_factory=dict)
    #: the same as a protobuf histogram message
    pb: dict[SeriesKey, bytes] = field(default_factory=dict)
    #: the series' merged HDR histogram, re-binned into its native histogram
    hdr: dict[SeriesKey, SparseHistogram] = field(default_factory=dict)
    #: the series' native schema: never finer than before (a coarser one is not a reset)
    schema: dict[SeriesKey, int] = field(default_factory=dict)
    native_lines: dict[SeriesKey, str] = field(default_factory=dict)
    native_pb: dict[SeriesKey, bytes] = field(default_factory=dict)

    def stores(self) -> tuple[dict[SeriesKey, Any], ...]:
        """Every per-series store (a series that leaves is dropped from each)."""
        return (
            self.buckets,
            self.count,
            self.sum_s,
            self.lines,
            self.pb,
            self.hdr,
            self.schema,
            self.native_lines,
            self.native_pb,
        )


class CumulativeHistograms:
    """Per series: classic buckets at ``le_seconds``, and a native histogram of ``schema`` (made
    coarser past ``max_buckets``)."""

    def __init__(self, le_seconds: Sequence[float], schema: int, max_buckets: int) -> None:
        self.le_seconds = tuple(le_seconds)
        self.schema = schema
        self.max_buckets = max_buckets
        self._le_us = [int(le * 1e6) for le in self.le_seconds]
        self._le_texts = [floatToGoString(le) for le in self.le_seconds]
        self._hist = _Histograms()
        #: the series in exposition order; None: sort again
        self._order: list[SeriesKey] | None = None
        self.generation = 0

    def add(self, w: WindowHistogram) -> None:
        """Add a finest window to its series' cumulative buckets and re-render their lines."""
        s, cum = w.series, self._hist
        if s not in cum.buckets:
            self._order = None
        buckets = cum.buckets.setdefault(s, [0] * len(self.le_seconds))
        for i, c in enumerate(w.hist.counts_at_or_below(self._le_us)):
            buckets[i] += c
        cum.count[s] = cum.count.get(s, 0) + int(w.hist.total)
        cum.sum_s[s] = cum.sum_s.get(s, 0.0) + w.hist.sum_us / 1e6
        cum.lines[s] = text.histogram_lines(s, self._le_texts, buckets, cum.count[s], cum.sum_s[s])
        cum.pb[s] = protobuf.histogram_pb(s, self.le_seconds, buckets, cum.count[s], cum.sum_s[s])
        merged = cum.hdr[s].merge(w.hist) if s in cum.hdr else w.hist
        cum.hdr[s] = merged
        native = rebin(merged, cum.schema.get(s, self.schema), self.max_buckets)
        cum.schema[s] = native.schema
        cum.native_lines[s] = text.native_lines(s, cum.count[s], cum.sum_s[s])
        cum.native_pb[s] = protobuf.native_pb(s, native, cum.count[s], cum.sum_s[s])
        self.generation += 1

    def drop(self, series: SeriesKey) -> None:
        """The series left /metrics: its cumulative series go with it."""
        if series in self._hist.buckets:
            self._order = None
            self.generation += 1
        for store in self._hist.stores():
            store.pop(series, None)

    def _series(self) -> list[SeriesKey]:
        """The series in exposition order (sorted again only after one came or went)."""
        if self._order is None:
            self._order = sorted(self._hist.lines, key=series_key)
        return self._order

    def text(self) -> tuple[list[str], list[str]]:
        """Each series' classic and native histogram lines in exposition order (references:
        they are replaced, never changed)."""
        cum = self._hist
        return [cum.lines[s] for s in self._series()], [cum.native_lines[s] for s in self._series()]

    def protobuf(self) -> tuple[list[bytes], list[bytes]]:
        """The same as protobuf histogram messages."""
        cum = self._hist
        return [cum.pb[s] for s in self._series()], [cum.native_pb[s] for s in self._series()]
