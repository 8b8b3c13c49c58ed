"""Cumulative counters and the pipeline's health: what the job counted besides latency.

A collector (``render`` reads it): it only updates its own state, under the renderer's lock, and
bumps ``generation`` whenever what it exports changes. The job hands its counters over as a
``StreamCounters`` (data walks forward); they are kept here as plain mappings and copied out
(``snapshot``) for a scrape, never rebuilt as the job's type.
"""

from __future__ import annotations

import time
from typing import Any

from core.echo import BAD_REASONS
from core.windows import SeriesKey, WindowHistogram
from streaming.counters import COUNTER_FIELDS, StreamCounters


def _add(into: dict[Any, int], key: Any, value: int) -> None:
    into[key] = into.get(key, 0) + int(value)


class Counters:
    """Each counter's values since the exporter started, and the last micro-batch's health."""

    def __init__(self) -> None:
        self._counters: dict[str, dict[Any, int]] = {name: {} for name in COUNTER_FIELDS}
        self._counters["bad"].update(dict.fromkeys(BAD_REASONS, 0))
        self._health: dict[str, float] = {}
        self.batches = 0
        self.generation = 0

    def derive(self, w: WindowHistogram, total: int, overflow: int) -> None:
        """Echo, loss and overflow counters from a partition's finest window (no job counters);
        ``total`` and ``overflow`` are its histogram's (read for the whole batch at once)."""
        s = w.series
        if s.kind == "e2e":
            topic = (s.cluster, s.topic, s.partition)
            _add(self._counters["echoes"], topic, total)
            _add(self._counters["lost"], topic, w.lost)
        if overflow:
            _add(self._counters["overflow"], s, overflow)
        self.generation += 1

    def add(self, counters: StreamCounters) -> None:
        """A batch's counters from the job."""
        for name in COUNTER_FIELDS:
            into = self._counters[name]
            for k, v in getattr(counters, name).items():
                _add(into, k, v)
        self.generation += 1

    def forget(self, triple: tuple[str, ...]) -> None:
        """A series gone from every resolution takes its cumulative counters along."""

        def of_triple(key: Any) -> bool:
            if isinstance(key, SeriesKey):
                return (key.cluster, key.topic, key.partition) == triple
            return bool(key == triple)

        for into in self._counters.values():
            for key in [k for k in into if of_triple(k)]:
                del into[key]
        self.generation += 1

    def bound_systems(self, clusters: set[str]) -> None:
        """Systems are kept only for ``clusters`` (those with a kept series): bounded by the cap."""
        systems = self._counters["systems"]
        gone = [k for k in systems if k[0] not in clusters]
        for key in gone:
            del systems[key]
        if gone:
            self.generation += 1

    def set_health(
        self,
        batch_duration_s: float,
        input_rows_per_s: float,
        watermark_lag_s: float,
        state_rows: int,
        last_batch_ts: float | None = None,
    ) -> None:
        """Record one completed micro-batch's health figures."""
        self.batches += 1
        self._health = {
            "batch_duration_seconds": batch_duration_s,
            "input_rows_per_second": input_rows_per_s,
            "watermark_lag_seconds": watermark_lag_s,
            "state_rows": float(state_rows),
            "last_batch_timestamp_seconds": last_batch_ts or time.time(),
        }
        self.generation += 1

    def snapshot(self) -> tuple[dict[str, dict[Any, int]], dict[str, float], int]:
        """Copies of the counters and the health, and the batches completed."""
        return {k: dict(v) for k, v in self._counters.items()}, dict(self._health), self.batches
