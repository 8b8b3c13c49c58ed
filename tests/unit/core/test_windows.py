"""Per-topic rollups are histogram merges, never quantile arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from core.hdr import HdrLayout, SparseHistogram
from core.windows import (
    ALL_PARTITIONS,
    SeriesKey,
    WindowHistogram,
    with_rollups,
    with_topic_rollups,
)


def test_rollup_is_the_merge_of_partitions() -> None:
    layout = HdrLayout()
    rng = np.random.default_rng(1)
    parts = [rng.lognormal(7, 1, 1000).astype(np.int64) + 1 for _ in range(3)]
    parts[2][:5] = 4_000_000  # one partition hiccups
    windows = [
        WindowHistogram(
            "10s",
            0,
            10_000_000,
            SeriesKey("c", "t", str(p), "e2e"),
            SparseHistogram.from_values(layout, v),
            lost=p,
        )
        for p, v in enumerate(parts)
    ]
    out = with_topic_rollups(windows)
    (rollup,) = [w for w in out if w.series.partition == ALL_PARTITIONS]
    whole = SparseHistogram.from_values(layout, np.concatenate(parts))
    assert rollup.hist.total == 3000 and rollup.lost == 3
    assert rollup.hist.value_at_quantile(0.999) == whole.value_at_quantile(0.999)
    assert rollup.hist.max_us == 4_000_000
    # averaging the partitions' p99.9 would hide most of the hiccup
    avg = np.mean([w.hist.value_at_quantile(0.999) for w in windows])
    assert avg < rollup.hist.value_at_quantile(0.999) / 2


def cell(partition: str, broker: str, values: list[int], lost: int = 0, kind: str = "e2e"):  # type: ignore[no-untyped-def]
    return WindowHistogram(
        "10s",
        0,
        10_000_000,
        SeriesKey("c", "t", partition, kind, broker),
        SparseHistogram.from_values(HdrLayout(), values),
        lost=lost,
    )


def test_broker_rollups_follow_the_send_time_leader_and_partitions_stay_one_series() -> None:
    # partition 0 moved from broker 1 to broker 3 within the window; broker 3 is slow
    cells = [
        cell("0", "1", [1_000] * 50, lost=1),
        cell("0", "3", [900_000] * 30 + [2_500_000], lost=2),
        cell("1", "2", [2_000] * 40),
        cell("2", "3", [800_000] * 20, lost=4),
        cell("all", "", [70_000], kind="hiccup"),  # the probe's own: passes through
    ]
    out = with_rollups(cells)
    assert not [w for w in out if w.series.is_cell]
    by = {(w.series.partition, w.series.broker, w.series.kind): w for w in out}
    assert len(by) == len(out)  # one window per series
    assert set(by) == {
        ("0", "", "e2e"), ("1", "", "e2e"), ("2", "", "e2e"), ("all", "", "e2e"),
        ("all", "", "hiccup"), ("all", "1", "e2e"), ("all", "2", "e2e"), ("all", "3", "e2e"),
    }  # fmt: skip
    p0 = by[("0", "", "e2e")]  # the leader move leaves one partition series, both leaders merged
    assert (p0.hist.total, p0.hist.max_us, p0.lost) == (81, 2_500_000, 3)
    assert p0.hist.value_at_quantile(0.5) == pytest.approx(1_000, rel=1e-3)
    b1, b2, b3 = (by[("all", b, "e2e")] for b in "123")
    assert (b1.hist.total, b1.hist.max_us, b1.lost) == (50, 1_000, 1)  # fast, its own loss
    assert (b2.hist.total, b2.hist.max_us, b2.lost) == (40, 2_000, 0)
    # broker 3's tail: both partitions it led, lost counts added; nothing of broker 1's
    assert (b3.hist.total, b3.hist.max_us, b3.lost) == (51, 2_500_000, 6)
    assert b3.hist.value_at_quantile(0.01) >= 799_000
    topic = by[("all", "", "e2e")]
    assert topic.hist.total == b1.hist.total + b2.hist.total + b3.hist.total == 141
    assert topic.lost == 7 and topic.hist.max_us == 2_500_000
    assert by[("all", "", "hiccup")].hist.max_us == 70_000


def test_windows_without_brokers_roll_up_as_before() -> None:
    plain = [cell(str(p), "", [1_000 * (p + 1)] * 10, lost=p) for p in range(3)]
    got, want = with_rollups(plain), with_topic_rollups(plain)
    assert [(w.series, w.lost, w.hist.total, w.hist.max_us) for w in got] == [
        (w.series, w.lost, w.hist.total, w.hist.max_us) for w in want
    ]
