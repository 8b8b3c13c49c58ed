"""The latest closed window of every series and resolution, and the held peaks of the merged ones.

A collector (``render`` reads it): it only updates its own state, under the renderer's lock.
Each resolution has its own ``generation``, bumped whenever one of its exported values changes
(a window, a held peak, a series that came or went), so the renderer re-encodes exactly the
resolutions that changed; ``generation`` covers them all.

A gauge of the latest closed window misses a window that closes between two scrapes and is
followed by another before the next (a backlog after an outage closes many at once: the stall's
own window among them). So each ``partition="all"`` series also holds a **peak** (``hold``): the
largest max, and the largest of each quantile, of its windows that arrived in the last
``hold_s``, never below the latest's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from core.hdr import ManyReads
from core.windows import ALL_PARTITIONS, KINDS, SeriesKey, WindowHistogram
from monitor.exporter.hold import PeakHold, Values, largest
from monitor.exporter.series import series_id
from monitor.exporter.window_rows import Snapshot, WindowTable

#: (resolution, series): one exported series of one resolution.
WindowKey = tuple[str, SeriesKey]


def _values(reads: ManyReads, i: int) -> Values:
    """One window's max and quantiles (None where too few samples), as ``hold`` keeps them."""
    return (int(reads.max_us[i]), *(None if v < 0 else v for v in reads.values[i].tolist()))


class LatestWindows:
    """Per resolution, a table of each series' latest window (``table``), and the held peaks."""

    def __init__(self, quantiles: int, hold_s: float) -> None:
        self.quantiles = quantiles
        self._latest: dict[WindowKey, WindowHistogram] = {}
        #: resolution → the latest window's values of each of its series
        self._tables: dict[str, WindowTable] = {}
        #: resolution → the latest window end seen
        self._window_end: dict[str, int] = {}
        #: the held peaks of the ``partition="all"`` series
        self.peaks: PeakHold[WindowKey] = PeakHold(hold_s)
        #: resolution → its generation; and the sum over every resolution
        self.generations: dict[str, int] = {}
        self.generation = 0

    def _changed(self, res: str) -> None:
        self.generations[res] = self.generations.get(res, 0) + 1
        self.generation += 1

    def expire(self, now: float) -> set[WindowKey]:
        """Let go of held values older than the hold; the keys whose peak may have fallen."""
        return self.peaks.expire(now)

    def add(
        self,
        windows: Sequence[WindowHistogram],
        reads: ManyReads,
        now: float,
        stale: set[WindowKey],
    ) -> None:
        """Take a batch's windows (``reads``: their quantiles); held ones join ``stale``, the keys
        whose peak ``refresh_peaks`` brings up to date."""
        #: resolution → series → the batch's latest window of it (index into windows)
        newest: dict[str, dict[SeriesKey, int]] = {}
        latest, ends = self._latest, self._window_end
        for i, w in enumerate(windows):
            res, series = w.resolution, w.series
            key = (res, series)
            if series.partition == ALL_PARTITIONS:  # topic, broker and hiccup series
                self.peaks.hold(key, _values(reads, i), now)
                stale.add(key)
            current = latest.get(key)
            if current is None or w.window_end_us >= current.window_end_us:
                latest[key] = w
                got = newest.get(res)
                if got is None:
                    got = newest[res] = {}
                got[series] = i
            if w.window_end_us > ends.get(res, 0):
                ends[res] = w.window_end_us
        for res, got in newest.items():
            self._changed(res)
            table = self._tables.get(res)
            if table is None:
                table = self._tables[res] = WindowTable(res, self.quantiles)
            rows = table.rows_for(list(got))
            at = np.fromiter(got.values(), dtype=np.int64, count=len(got))
            table.end_us[rows] = [windows[i].window_end_us for i in at.tolist()]
            table.span_us[rows] = [
                windows[i].window_end_us - windows[i].window_start_us for i in at.tolist()
            ]
            table.max_us[rows] = reads.max_us[at]
            table.total[rows] = reads.totals[at]
            table.lost[rows] = [windows[i].lost for i in at.tolist()]
            table.quantiles_us[rows] = reads.values[at]

    def evict_stale(self, ttl_windows: int) -> list[tuple[WindowKey, bool]]:
        """Drop series with no closed window for ``ttl_windows`` of their resolution: a partition
        or probe that went away leaves /metrics (and memory) rather than be exported forever at
        its last value. Each removed key, and whether another kind of its series id still has a
        window of that resolution."""
        stale = [
            (res, series)
            for res, table in self._tables.items()
            for series in table.stale(self._window_end[res], ttl_windows)
        ]
        out = []
        for res, series in stale:
            del self._latest[(res, series)]
            self._tables[res].drop(series)
            self.peaks.drop((res, series))
            self._changed(res)
            sid = series_id(series)
            kept = any((res, SeriesKey(*sid[:3], kind, sid[3])) in self._latest for kind in KINDS)
            out.append(((res, series), kept))
        return out

    def refresh_peaks(self, keys: set[WindowKey]) -> None:
        """Bring the held peaks of ``keys`` up to date (a change re-encodes the resolution)."""
        for key in keys:
            res, series = key
            table = self._tables.get(res)
            if table is None or series not in table:
                continue
            if table.set_peak(series, self._peak(key, table.latest(series))):
                self._changed(res)

    def _peak(self, key: WindowKey, latest: Values) -> Values:
        """The held peak of a series, never below its latest window."""
        held = self.peaks.peak(key)
        return largest([held, latest]) if held is not None else latest

    def resolutions(self) -> list[str]:
        """The resolutions with a window, in exposition order."""
        return sorted(self._window_end)

    def window_end(self) -> dict[str, int]:
        """Resolution → its latest window end (a copy)."""
        return dict(self._window_end)

    def snapshot(self, res: str) -> Snapshot:
        """One resolution's values in exposition order (copies)."""
        return self._tables[res].snapshot()

    def brokers(self) -> bool:
        """Whether any resolution holds a broker rollup."""
        return any(table.brokers() for table in self._tables.values())

    def windows(self, brokers: bool = False) -> dict[str, list[WindowHistogram]]:
        """Resolution → the latest closed window of each series (broker rollups: ``brokers``)."""
        out: dict[str, list[WindowHistogram]] = {}
        for (res, series), w in self._latest.items():
            if brokers or not series.broker:
                out.setdefault(res, []).append(w)
        return out
