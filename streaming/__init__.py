"""The Spark Structured Streaming job: echoes to windowed, mergeable HDR histograms.

Importing this package does not import pyspark; the job module does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["StreamConfig", "StreamJob", "WindowSink"]


def __getattr__(name: str) -> Any:
    if name == "StreamJob":
        from streaming.job import StreamJob

        return StreamJob
    if name == "WindowSink":
        from streaming.sink import WindowSink

        return WindowSink
    if name == "StreamConfig":
        from streaming.config import StreamConfig

        return StreamConfig
    raise AttributeError(name)
