"""Closed windows: the unit handed from the streaming job to the exporter, archive and reports."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from core.hdr import SparseHistogram

#: Latency kinds, in the order they are displayed.
KINDS = ("e2e", "publish", "send_lag", "hiccup")
#: The ``partition`` label of a per-topic merge of all partitions.
ALL_PARTITIONS = "all"


@dataclass(frozen=True)
class SeriesKey:
    """What a latency series is about."""

    cluster: str
    topic: str
    partition: str
    kind: str


@dataclass(frozen=True)
class WindowHistogram:
    """The final histogram of one series over one closed event-time window."""

    resolution: str
    window_start_us: int
    window_end_us: int
    series: SeriesKey
    hist: SparseHistogram
    lost: int = 0

    @property
    def sort_key(self) -> tuple[str, int, str, str, str, str]:
        """Stable order: resolution, window start, then the series."""
        s = self.series
        return (self.resolution, self.window_start_us, s.cluster, s.topic, s.partition, s.kind)

    def merge(self, other: WindowHistogram) -> WindowHistogram:
        """Both windows' samples in one histogram; the window span covers both."""
        return replace(
            self,
            window_start_us=min(self.window_start_us, other.window_start_us),
            window_end_us=max(self.window_end_us, other.window_end_us),
            hist=self.hist.merge(other.hist),
            lost=self.lost + other.lost,
        )


def merge_all(windows: Iterable[WindowHistogram]) -> WindowHistogram:
    """Merge histograms (add bucket counts); never combine quantiles."""
    it = iter(windows)
    try:
        acc = next(it)
    except StopIteration:
        raise ValueError("nothing to merge") from None
    for w in it:
        acc = acc.merge(w)
    return acc


def with_topic_rollups(windows: Iterable[WindowHistogram]) -> list[WindowHistogram]:
    """The windows plus a ``partition="all"`` merge per resolution, window, topic and kind."""
    items = list(windows)
    groups: dict[tuple[str, int, str, str, str], list[WindowHistogram]] = {}
    for w in items:
        if w.series.partition == ALL_PARTITIONS:
            continue
        key = (w.resolution, w.window_start_us, w.series.cluster, w.series.topic, w.series.kind)
        groups.setdefault(key, []).append(w)
    rollups = [
        replace(merge_all(group), series=replace(group[0].series, partition=ALL_PARTITIONS))
        for group in groups.values()
    ]
    return items + rollups
