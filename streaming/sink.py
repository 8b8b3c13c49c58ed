"""Where closed windows leave the job: a sink the composing stage supplies (no exporter here)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from core.windows import WindowHistogram
from streaming.counters import StreamCounters


class WindowSink(Protocol):
    """Takes each micro-batch's closed windows and counters, then the batch's pipeline health."""

    def update(self, windows: Sequence[WindowHistogram], counters: StreamCounters) -> None:
        """One batch's closed windows (each final, topic and broker rollups included) and its
        counters."""
        ...

    def set_pipeline_health(
        self,
        batch_duration_s: float,
        input_rows_per_s: float,
        watermark_lag_s: float,
        state_rows: int,
        last_batch_ts: float | None = None,
    ) -> None:
        """The last completed micro-batch's duration, input rate, watermark lag and state size."""
        ...
