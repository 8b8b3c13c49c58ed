"""One Spark session for the streaming tests: local[2], few shuffle partitions, quiet."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from streaming.config import StreamConfig
    from streaming.job import spark_session

    session = spark_session(
        StreamConfig(bootstrap="unused:1", master="local[2]", shuffle_partitions=2)
    )
    yield session
    session.stop()
