"""A resolution's rows: a series keeps its row and values while it stays, rows are reused after
it leaves, and a snapshot lists the series in exposition order (brokers apart)."""

from __future__ import annotations

import numpy as np

from core.windows import SeriesKey
from monitor.exporter.window_rows import ABSENT, WindowTable


def key(p: int, kind: str = "e2e", broker: str = "") -> SeriesKey:
    return SeriesKey("c", "t", "all" if broker else str(p), kind, broker)


def test_rows_grow_keep_their_values_and_are_reused_after_a_series_left() -> None:
    table = WindowTable("10s", quantiles=2)
    first = [key(p) for p in range(200)]  # past the first allocation (64 rows)
    rows = table.rows_for(first)
    assert len(set(rows.tolist())) == 200
    table.max_us[rows] = np.arange(200)
    table.end_us[rows], table.span_us[rows] = 100, 10
    table.rows_for([key(p) for p in range(200, 300)])  # grows again
    assert table.max_us[table.rows_for(first)].tolist() == list(range(200))
    layout = table.layout
    table.drop(first[7])
    assert table.layout > layout and first[7] not in table and len(table) == 299
    again = table.rows_for([key(999)])
    assert again[0] == rows[7]  # the freed row
    assert table.latest(key(999)) == (None, None, None)  # cleared, nothing of the old series


def test_stale_series_are_those_a_ttl_of_windows_behind_the_latest() -> None:
    table = WindowTable("10s", quantiles=1)
    old, fresh = table.rows_for([key(1), key(2)])
    table.end_us[[old, fresh]] = [40_000_000, 100_000_000]
    table.span_us[[old, fresh]] = 10_000_000
    assert table.stale(100_000_000, ttl_windows=6) == []  # 60 s behind: not more than 6 windows
    assert table.stale(101_000_000, ttl_windows=6) == [key(1)]


def test_a_snapshot_is_in_exposition_order_with_brokers_apart_and_holds_copies() -> None:
    table = WindowTable("1m", quantiles=2)
    series = [key(10), key(2, "publish"), key(0, broker="1"), key(2)]
    rows = table.rows_for(series)
    table.quantiles_us[rows] = [[1, 2], [3, ABSENT], [5, 6], [7, 8]]
    assert table.set_peak(key(0, broker="1"), (9, 5, None))
    assert not table.set_peak(key(0, broker="1"), (9, 5, None))  # the same: no change
    snap = table.snapshot()
    assert snap.series == ((key(10), key(2), key(2, "publish")), (key(0, broker="1"),))
    assert snap.quantiles_us[0].tolist() == [[1, 2], [7, 8], [3, ABSENT]]
    assert snap.peak_max_us[1].tolist() == [9] and snap.peak_quantiles_us[1].tolist() == [[5, -1]]
    table.quantiles_us[rows] = 0
    assert snap.quantiles_us[0].tolist() == [[1, 2], [7, 8], [3, ABSENT]]  # a copy
