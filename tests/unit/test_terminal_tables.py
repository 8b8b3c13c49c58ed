"""The demo's quantile table: gated nines per series, exact max."""

from __future__ import annotations

import pytest

from core.hdr import HdrLayout, SparseHistogram
from core.windows import SeriesKey, WindowHistogram
from monitor.terminal_tables import quantile_table


def test_quantile_table_rows() -> None:
    w = WindowHistogram(
        "10s", 0, 10_000_000, SeriesKey("c", "t", "0", "e2e"),
        SparseHistogram.from_values(HdrLayout(), list(range(1, 1001))), 0,
    )  # fmt: skip
    rows = quantile_table([w])
    (row,) = rows
    assert row["samples"] == 1000 and row["max"] == pytest.approx(0.001)
    assert row["p99.9"] is not None and row["p99.99"] is None
