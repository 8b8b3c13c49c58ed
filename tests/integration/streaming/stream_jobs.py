"""What the stream job's integration tests share: a sink that keeps everything, and the job as
they run it (local[2], a 1 s watermark, every offset from the start)."""

from __future__ import annotations

import threading
import time
from typing import Any

from core.windows import WindowHistogram
from streaming.config import StreamConfig
from streaming.counters import StreamCounters


def job_config(bootstrap: str, topic: str, **overrides: Any) -> StreamConfig:
    """The stream job's config in these tests; ``overrides`` are the keys a test cares about."""
    values: dict[str, Any] = {
        "bootstrap": bootstrap,
        "echo_topic": topic,
        "windows": "10s",
        "watermark": "1s",
        "trigger": "500ms",
        "starting_offsets": "earliest",
        "metrics_port": 0,
        "master": "local[2]",
        "shuffle_partitions": 2,
        **overrides,
    }
    return StreamConfig.model_validate(values)


class Collector:
    """Every closed window and counter the job hands to its sink."""

    def __init__(self) -> None:
        self.windows: list[WindowHistogram] = []
        self.counters = StreamCounters()
        self.lock = threading.Lock()

    def __call__(self, batch_id: int, windows: list[WindowHistogram], c: StreamCounters) -> None:
        with self.lock:
            self.windows.extend(windows)
            self.counters = self.counters.merge(c)

    def wait(self, predicate: Any, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if predicate(self):
                    return
            time.sleep(0.5)
        raise AssertionError("timed out waiting for the stream job")
