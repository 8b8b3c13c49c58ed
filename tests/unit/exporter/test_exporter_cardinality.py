"""Cardinality is bounded and visible: a cap on series, counted refusals, stale series evicted."""

from __future__ import annotations

import re

from core.hdr import HdrLayout, SparseHistogram
from core.windows import SeriesKey, WindowHistogram
from monitor.exporter import ExporterConfig, LatencyExporter
from testkit.exporter import text_body

HIST = SparseHistogram.from_values(HdrLayout(), [1_000, 2_000])


def window(partition: str, end_s: int, res: str = "10s", span_s: int = 10) -> WindowHistogram:
    start = (end_s - span_s) * 1_000_000
    key = SeriesKey("c", "t", partition, "e2e")
    return WindowHistogram(res, start, end_s * 1_000_000, key, HIST)


def value(body: str, name: str) -> float:
    m = re.search(rf"^{name} (\S+)$", body, re.M)
    assert m, name
    return float(m.group(1))


def partitions_exported(body: str) -> set[str]:
    return set(re.findall(r'nines_latency_max_seconds\{[^}]*partition="([^"]+)"', body))


def test_new_series_beyond_the_cap_are_counted_not_exported() -> None:
    exp = LatencyExporter(ExporterConfig(max_series=3))
    exp.update([window(str(p), 10) for p in range(5)])
    body = text_body(exp).decode()
    assert partitions_exported(body) == {"0", "1", "2"}
    assert value(body, "nines_series") == 3
    assert value(body, "nines_series_limit") == 3
    assert value(body, "nines_series_rejected_total") == 2
    # known series keep updating at the cap; new ones keep being refused and counted
    exp.update([window(str(p), 20) for p in range(5)])
    body = text_body(exp).decode()
    assert partitions_exported(body) == {"0", "1", "2"}
    assert value(body, "nines_series_rejected_total") == 4


def test_a_series_without_windows_leaves_metrics_and_frees_its_place() -> None:
    exp = LatencyExporter(ExporterConfig(max_series=2, series_ttl_windows=3))
    exp.update([window("gone", 10), window("live", 10)])
    for end in (20, 30, 40):  # "gone" is 3 windows behind: still within the TTL
        exp.update([window("live", end)])
    assert partitions_exported(text_body(exp).decode()) == {"gone", "live"}
    exp.update([window("live", 50)])  # now 4 windows behind: evicted, with its cumulative series
    body = text_body(exp).decode()
    assert partitions_exported(body) == {"live"}
    assert 'partition="gone"' not in body
    assert value(body, "nines_series_evicted_total") == 1
    assert value(body, "nines_series") == 1
    exp.update([window("new", 60), window("live", 60)])  # its place is free for a new series
    assert partitions_exported(text_body(exp).decode()) == {"live", "new"}
    assert value(text_body(exp).decode(), "nines_series_rejected_total") == 0
