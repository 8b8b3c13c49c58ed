"""What the /metrics server's tests share: the servers a test starts, closed after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import runtime.webserver as ws


@pytest.fixture
def servers() -> Iterator[list[ws.MetricsServer]]:
    """A list a test appends its servers to; each is closed when the test ends."""
    started: list[ws.MetricsServer] = []
    yield started
    for s in started:
        s.close()
