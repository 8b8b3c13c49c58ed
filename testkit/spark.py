"""Driving a running stream query to a known point: tests and benches need it, the product not."""

from __future__ import annotations

from typing import Any, Protocol


class Running(Protocol):
    """A started ``StreamJob`` or ``StreamPipeline``: anything holding a Spark streaming query."""

    @property
    def query(self) -> Any: ...


def process_all_available(job: Running) -> None:
    """Block until ``job`` has processed everything currently in Kafka (Spark's
    ``processAllAvailable`` on its query)."""
    job.query.processAllAvailable()
