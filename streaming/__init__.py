"""The Spark Structured Streaming job: echoes to windowed, mergeable HDR histograms.

Importing this package does not import pyspark; the job module does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["StreamConfig", "StreamJob", "run_stream"]


def __getattr__(name: str) -> Any:
    if name in ("StreamJob", "run_stream"):
        from streaming import job

        return getattr(job, name)
    if name == "StreamConfig":
        from streaming.config import StreamConfig

        return StreamConfig
    raise AttributeError(name)
