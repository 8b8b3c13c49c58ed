"""Per-topic rollups are histogram merges, never quantile arithmetic."""

from __future__ import annotations

import numpy as np

from core.hdr import HdrLayout, SparseHistogram
from core.windows import ALL_PARTITIONS, SeriesKey, WindowHistogram, with_topic_rollups


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
