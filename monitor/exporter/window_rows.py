"""The latest closed window of every series of one resolution, as rows of numbers.

A closed window's exported values (its max, sample count, lost messages, each quantile, and the
held peak of a ``partition="all"`` series) are a fixed-shape record, so they are kept in arrays,
one row per series; a series keeps its row while it stays. Encoding them is ``samples``' job:
the label prefix of a (series, quantile) sample never changes, only its value does, so a scrape
joins cached prefixes with the values of the rows in one pass per resolution, and only for a
resolution whose values changed since the last scrape (a window that is superseded before the
next scrape is never encoded at all).

Pure bookkeeping: the exporter holds the lock; ``snapshot`` copies what a scrape encodes outside.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from core.windows import SeriesKey
from monitor.exporter.contract import series_key

I64 = npt.NDArray[np.int64]
#: A value that is not there: a quantile of a window too small for it, or no held peak.
ABSENT = -1
_FIRST_ROWS = 64


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a scrape encodes of one resolution: its series in exposition order, partition and
    topic series apart from broker rollups, and their values (copies: batches go on)."""

    resolution: str
    #: the series set's generation: encoded label prefixes in this order are kept until it moves
    layout: int
    series: tuple[tuple[SeriesKey, ...], tuple[SeriesKey, ...]]
    #: per group: max_us, total, lost (rows), quantiles_us (rows × quantiles), held peak's max
    #: and quantiles (ABSENT where a series holds none)
    max_us: tuple[I64, I64]
    total: tuple[I64, I64]
    lost: tuple[I64, I64]
    quantiles_us: tuple[I64, I64]
    peak_max_us: tuple[I64, I64]
    peak_quantiles_us: tuple[I64, I64]


class WindowTable:
    """One resolution's rows: series → row, and each row's latest values."""

    def __init__(self, resolution: str, quantiles: int) -> None:
        self.resolution = resolution
        self.quantiles = quantiles
        self._row: dict[SeriesKey, int] = {}
        #: row → its series (None: free)
        self._series_at: list[SeriesKey | None] = [None] * _FIRST_ROWS
        self._free: list[int] = []
        #: bumped whenever a series comes or goes (the exposition order changes)
        self.layout = 0
        self._order: tuple[I64, I64] | None = None
        self._series: tuple[tuple[SeriesKey, ...], tuple[SeriesKey, ...]] = ((), ())
        self._alloc(_FIRST_ROWS)
        self._free = list(range(_FIRST_ROWS - 1, -1, -1))

    def _alloc(self, rows: int) -> None:
        """Room for ``rows`` series: the arrays grown, the rows kept."""
        q = self.quantiles
        old = getattr(self, "max_us", None)
        kept = 0 if old is None else len(old)

        def grow(new: I64, name: str) -> I64:
            if kept:
                new[:kept] = getattr(self, name)
            return new

        #: the latest window's end and length (``stale``)
        self.used = grow(np.zeros(rows, bool), "used")
        self.end_us = grow(np.zeros(rows, np.int64), "end_us")
        self.span_us = grow(np.zeros(rows, np.int64), "span_us")
        self.max_us = grow(np.full(rows, ABSENT, np.int64), "max_us")
        self.total = grow(np.zeros(rows, np.int64), "total")
        self.lost = grow(np.zeros(rows, np.int64), "lost")
        self.quantiles_us = grow(np.full((rows, q), ABSENT, np.int64), "quantiles_us")
        self.peak_max_us = grow(np.full(rows, ABSENT, np.int64), "peak_max_us")
        self.peak_quantiles_us = grow(np.full((rows, q), ABSENT, np.int64), "peak_quantiles_us")

    def __len__(self) -> int:
        return len(self._row)

    def __contains__(self, series: SeriesKey) -> bool:
        return series in self._row

    def rows_for(self, series: Sequence[SeriesKey]) -> I64:
        """The row of each series, a new one for a series not seen before."""
        out = np.empty(len(series), np.int64)
        row = self._row
        for i, s in enumerate(series):
            r = row.get(s)
            if r is None:
                r = self._add(s)
            out[i] = r
        return out

    def _add(self, series: SeriesKey) -> int:
        if not self._free:
            size = len(self.max_us)
            self._alloc(size * 2)
            self._free = list(range(size * 2 - 1, size - 1, -1))
            self._series_at += [None] * size
        r = self._free.pop()
        self._row[series] = r
        self._series_at[r] = series
        self.used[r] = True
        self._moved()
        return r

    def drop(self, series: SeriesKey) -> None:
        """The series left: its row is cleared and free for another."""
        r = self._row.pop(series)
        self._series_at[r] = None
        self.used[r] = False
        self.end_us[r] = self.span_us[r] = 0
        self.max_us[r] = self.peak_max_us[r] = ABSENT
        self.total[r] = self.lost[r] = 0
        self.quantiles_us[r] = self.peak_quantiles_us[r] = ABSENT
        self._free.append(r)
        self._moved()

    def _moved(self) -> None:
        self.layout += 1
        self._order = None

    def stale(self, latest_end_us: int, ttl_windows: int) -> list[SeriesKey]:
        """Series whose latest window ended more than ``ttl_windows`` of its length before
        ``latest_end_us`` (the resolution's latest end): gone, by ``series_ttl_windows``."""
        rows = np.flatnonzero(
            self.used & (latest_end_us - self.end_us > ttl_windows * self.span_us)
        )
        return [s for s in (self._series_at[r] for r in rows.tolist()) if s is not None]

    def latest(self, series: SeriesKey) -> tuple[int | None, ...]:
        """The series' max and quantiles (None where absent), as ``hold`` keeps them."""
        r = self._row[series]
        return tuple(
            None if v == ABSENT else v
            for v in (int(self.max_us[r]), *self.quantiles_us[r].tolist())
        )

    def set_peak(self, series: SeriesKey, peak: Sequence[int | None]) -> bool:
        """Hold ``peak`` (max, then quantiles) for the series; whether anything changed."""
        r = self._row[series]
        new = [ABSENT if v is None else v for v in peak]
        if int(self.peak_max_us[r]) == new[0] and self.peak_quantiles_us[r].tolist() == new[1:]:
            return False
        self.peak_max_us[r] = new[0]
        self.peak_quantiles_us[r] = new[1:]
        return True

    def order(self) -> tuple[I64, I64]:
        """Rows in exposition order: partition and topic series, then broker rollups apart
        (sorted again only after a series came or went)."""
        if self._order is None:
            mine = sorted(self._row, key=series_key)
            topics = tuple(s for s in mine if not s.broker)
            brokers = tuple(s for s in mine if s.broker)
            self._series = (topics, brokers)
            self._order = (
                np.array([self._row[s] for s in topics], np.int64),
                np.array([self._row[s] for s in brokers], np.int64),
            )
        return self._order

    def brokers(self) -> bool:
        """Whether any of the series is a broker rollup."""
        return len(self.order()[1]) > 0

    def snapshot(self) -> Snapshot:
        """The rows in exposition order with copies of their values."""
        order = self.order()

        def pick(a: I64) -> tuple[I64, I64]:
            return (a[order[0]], a[order[1]])

        return Snapshot(
            self.resolution,
            self.layout,
            self._series,
            pick(self.max_us),
            pick(self.total),
            pick(self.lost),
            pick(self.quantiles_us),
            pick(self.peak_max_us),
            pick(self.peak_quantiles_us),
        )
