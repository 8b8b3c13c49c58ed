"""What the stream job's integration tests share: a sink that keeps everything, and the job as
they run it (local[2], a 1 s watermark, every offset from the start)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from core.windows import WindowHistogram
from streaming.config import StreamConfig
from streaming.counters import StreamCounters
from streaming.job import StreamJob


def job_config(bootstrap: str, topic: str, **overrides: Any) -> StreamConfig:
    """The stream job's config in these tests; ``overrides`` are the keys a test cares about."""
    values: dict[str, Any] = {
        "bootstrap": bootstrap,
        "echo_topic": topic,
        "windows": "10s",
        "watermark": "1s",
        "trigger": "500ms",
        "starting_offsets": "earliest",
        "master": "local[2]",
        "shuffle_partitions": 2,
        **overrides,
    }
    return StreamConfig.model_validate(values)


class Collector:
    """Every closed window (or those ``keep`` accepts), counter and batch id the job hands to its
    sink."""

    def __init__(self, keep: Callable[[WindowHistogram], bool] | None = None) -> None:
        self.keep = keep
        self.windows: list[WindowHistogram] = []
        self.counters = StreamCounters()
        self.ids: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, batch_id: int, windows: list[WindowHistogram], c: StreamCounters) -> None:
        with self.lock:
            self.ids.append(batch_id)
            self.windows += [w for w in windows if self.keep is None or self.keep(w)]
            self.counters = self.counters.merge(c)

    def wait(self, predicate: Any, timeout_s: float = 120, job: StreamJob | None = None) -> None:
        """Until ``predicate(self)``; with ``job``, a failed query fails at once, with its error."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if job is not None:
                assert job.query.exception() is None, job.query.exception()
            with self.lock:
                if predicate(self):
                    return
            time.sleep(0.2)
        raise AssertionError(f"timed out; batches {self.ids}, counters {self.counters}")
