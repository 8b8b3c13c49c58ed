"""Per-broker rollups are their own gauge families, under the same series cap and TTL."""

from __future__ import annotations

import re

import pytest
from exposition_lint import promtool_findings
from prometheus_client.parser import text_string_to_metric_families

from core.hdr import HdrLayout, SparseHistogram
from core.windows import SeriesKey, WindowHistogram, with_rollups
from monitor.exporter import ExporterConfig, LatencyExporter
from testkit.exporter import text_body

LAYOUT = HdrLayout()


def cell(partition: str, broker: str, values: list[int], end_s: int = 10, lost: int = 0):  # type: ignore[no-untyped-def]
    return WindowHistogram(
        "10s",
        (end_s - 10) * 1_000_000,
        end_s * 1_000_000,
        SeriesKey("c", "t", partition, "e2e", broker),
        SparseHistogram.from_values(LAYOUT, values),
        lost,
    )


def samples(body: bytes) -> dict[str, list]:  # type: ignore[type-arg]
    out: dict[str, list] = {}  # type: ignore[type-arg]
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def test_broker_families_beside_unchanged_partition_series() -> None:
    exp = LatencyExporter()
    exp.update(
        with_rollups(
            [
                cell("0", "1", [1_000] * 1000, lost=1),
                cell("0", "3", [400_000] * 1000 + [900_000]),  # leader moved 1 → 3: slow
                cell("1", "2", [2_000] * 1000, lost=2),
            ]
        )
    )
    body = text_body(exp)
    s = samples(body)
    mx = {x.labels["broker"]: x.value for x in s["nines_broker_latency_max_seconds"]}
    assert mx == {"1": 0.001, "2": 0.002, "3": 0.9}
    assert all("partition" not in x.labels for x in s["nines_broker_latency_max_seconds"])
    n = {x.labels["broker"]: x.value for x in s["nines_broker_latency_window_samples"]}
    assert n == {"1": 1000, "2": 1000, "3": 1001}
    lost = {x.labels["broker"]: x.value for x in s["nines_broker_latency_window_lost"]}
    assert lost == {"1": 1, "2": 2, "3": 0}
    p999 = {
        x.labels["broker"]: x.value
        for x in s["nines_broker_latency_seconds"]
        if x.labels["q"] == "0.999"
    }
    assert p999["1"] == pytest.approx(0.001, rel=1e-3)
    assert p999["3"] == pytest.approx(0.4, rel=1e-3)
    # partition series and the topic merge: one series each, no broker label, as before
    parts = [(x.labels["partition"], x.value) for x in s["nines_latency_max_seconds"]]
    assert sorted(parts) == [("0", 0.9), ("1", 0.002), ("all", 0.9)]
    assert all("broker" not in x.labels for x in s["nines_latency_max_seconds"])
    counts = {x.labels["partition"]: x.value for x in s["nines_latency_classic_seconds_count"]}
    assert counts == {"all": 3001}  # per topic by default; no broker double count in it
    assert s["nines_series"][0].value == 6  # 2 partitions, the topic, 3 brokers
    assert sorted(w.series.partition for w in exp.latest_windows()["10s"]) == ["0", "1", "all"]
    assert len(exp.latest_windows(brokers=True)["10s"]) == 6
    assert promtool_findings(body) == []


def test_broker_series_count_against_the_cap_and_leave_after_the_ttl() -> None:
    exp = LatencyExporter(ExporterConfig(max_series=4, series_ttl_windows=2))
    exp.update(with_rollups([cell("0", "1", [1_000]), cell("1", "2", [1_000])]))
    body = text_body(exp).decode()
    # partitions 0 and 1 and the topic came first; of the brokers only one fits
    assert re.findall(r'nines_broker_latency_max_seconds\{[^}]*broker="(\d)"', body) == ["1"]
    assert "nines_series_rejected_total 1.0" in body
    # broker 1 leads nothing any more: its series leaves after the TTL (evicted at the end of the
    # update at 40 s) and frees its place for broker 2 (admitted at 50 s)
    for end in (20, 30, 40, 50):
        exp.update(with_rollups([cell("0", "2", [1_000], end), cell("1", "2", [1_000], end)]))
    body = text_body(exp).decode()
    assert re.findall(r'nines_broker_latency_max_seconds\{[^}]*broker="(\d)"', body) == ["2"]
    assert 'broker="1"' not in body
    assert "nines_series 4.0" in body
    assert "nines_series_evicted_total 1.0" in body
