"""The series cap: which series /metrics keeps, and what the cap and the TTL removed.

A collector (``render`` reads it): it only updates its own state, under the renderer's lock, and
bumps ``generation`` whenever what it exports changes.
"""

from __future__ import annotations

from core.windows import SeriesKey, WindowHistogram

#: What the cap counts: (cluster, topic, partition, broker), all kinds together.
SeriesId = tuple[str, str, str, str]


def series_id(s: SeriesKey) -> SeriesId:
    """The id the cap counts a series under (its kind left out)."""
    return (s.cluster, s.topic, s.partition, s.broker)


class SeriesBook:
    """Series ids kept (each with the resolutions it has a window in), up to ``max_series``."""

    def __init__(self, max_series: int) -> None:
        self.max_series = max_series
        self._admitted: dict[SeriesId, set[str]] = {}
        #: closed windows of new series refused by the cap, and series windows the TTL removed
        self.rejected = 0
        self.evicted = 0
        self.generation = 0

    def __len__(self) -> int:
        return len(self._admitted)

    def admit(self, w: WindowHistogram) -> bool:
        """Whether the window's series is kept: known already, or new and under the cap (a
        refused one is counted, never silent)."""
        sid = series_id(w.series)
        resolutions = self._admitted.get(sid)
        if resolutions is None:
            if len(self._admitted) >= self.max_series:
                self.rejected += 1
                self.generation += 1
                return False
            resolutions = self._admitted[sid] = set()
            self.generation += 1
        resolutions.add(w.resolution)
        return True

    def evicted_window(self, resolution: str, series: SeriesKey, kept_there: bool) -> bool:
        """The TTL removed a window series; ``kept_there``: another kind of its id still has a
        window of ``resolution``. Whether its id is gone from every resolution."""
        self.evicted += 1
        self.generation += 1
        if kept_there:
            return False
        sid = series_id(series)
        left = self._admitted.get(sid)
        if left is None:
            return False
        left.discard(resolution)
        if left:
            return False
        del self._admitted[sid]
        return True

    def clusters(self) -> set[str]:
        """Clusters with a kept series."""
        return {sid[0] for sid in self._admitted}
