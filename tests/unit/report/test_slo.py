"""One SLO evaluator (monitor.slo) for the demo's live table and `nines slo`'s attainment."""

from __future__ import annotations

import math

import numpy as np

from core.hdr import HdrLayout, SparseHistogram
from core.sla import parse_sla
from core.windows import SeriesKey, WindowHistogram, with_topic_rollups
from monitor.report.curves import percentile_curve, x_positions, x_ticks
from monitor.slo import attainment, live_status

LAYOUT = HdrLayout()
SLA = parse_sla(
    {
        "windows": ["10s"],
        "objectives": [
            {"name": "fast", "quantile": 0.99, "threshold": "10ms", "window": "10s"},
            {"name": "cap", "max": "1s", "window": "10s"},
            {"name": "p1", "partition": 1, "max": "1s", "window": "10s"},
            {"name": "loss", "loss_ratio": 0.01},
        ],
    }
)


def window(partition: str, values_us: list[int], lost: int = 0) -> WindowHistogram:
    hist = SparseHistogram.from_values(LAYOUT, values_us)
    return WindowHistogram("10s", 0, 10_000_000, SeriesKey("c", "t", partition, "e2e"), hist, lost)


def test_attainment_counts_each_sample_once_even_beside_topic_merges() -> None:
    per_partition = [window("0", [5_000] * 95 + [50_000] * 5, lost=1), window("1", [5_000] * 100)]
    rows = {o.name: attainment(o, with_topic_rollups(per_partition)) for o in SLA.objectives}
    assert rows["fast"] == {
        "objective": "fast",
        "samples": 200,
        "target": "0.99 <= 10ms",
        "value": 0.975,
        "met": False,
    }
    assert rows["loss"]["value"] == 1 / 200
    assert rows["p1"]["samples"] == 100 and rows["p1"]["met"] is True
    assert rows == {o.name: attainment(o, per_partition) for o in SLA.objectives}


def test_attainment_without_matching_windows_is_no_data() -> None:
    row = attainment(SLA.objectives[2], [window("0", [5_000])])
    assert row == {"objective": "p1", "samples": 0, "value": None, "met": None}


def test_live_status_and_attainment_read_the_same_series() -> None:
    latest = {"10s": with_topic_rollups([window("0", [5_000] * 100), window("1", [2_000_000])])}
    rows = {r["name"]: r for r in live_status(SLA, latest)}
    assert rows["cap"]["state"] == rows["p1"]["state"] == "BREACH"
    assert rows["fast"]["state"] == "ok"  # partition 1 has too few samples for a p99
    met = {o.name: attainment(o, latest["10s"])["met"] for o in SLA.objectives}
    assert met["cap"] is met["p1"] is False


def test_curve_geometry_puts_the_max_a_decade_past_the_last_percentile() -> None:
    pts = percentile_curve(SparseHistogram.from_values(LAYOUT, np.arange(1, 1001)))
    xs, max_x = x_positions(pts)
    assert math.isclose(max_x, 10 * xs[-2]) and xs[-1] == max_x
    assert math.isclose(xs[-2], 1000, rel_tol=1e-6)
    ticks = x_ticks(max_x)
    assert [name for _, name in ticks] == ["0%", "90%", "99%", "99.9%", "max"]
