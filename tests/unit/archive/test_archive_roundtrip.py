"""The archive round-trips windows exactly, rewrites replays identically, and exports .hlog."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from core.hdr import HdrLayout, SparseHistogram
from core.hdr_codec import to_hdrh
from core.windows import SeriesKey, WindowHistogram, with_rollups, with_topic_rollups
from streaming.archive import write_windows
from streaming.archive_read import export_hlog
from testkit.archive import read_windows

LAYOUT = HdrLayout()
T0 = 1_795_000_000_000_000


def windows(seed: int = 0) -> list[WindowHistogram]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(3):
        for p in ("0", "1"):
            v = rng.lognormal(7, 1.2, 2000).astype(np.int64) + 1
            out.append(
                WindowHistogram(
                    "10s",
                    T0 + i * 10_000_000,
                    T0 + (i + 1) * 10_000_000,
                    SeriesKey("c", "t", p, "e2e"),
                    SparseHistogram.from_values(LAYOUT, v),
                    lost=i,
                )
            )
    return with_topic_rollups(out)


def test_roundtrip_and_idempotent_replay(tmp_path: Path) -> None:
    ws = windows()
    paths = write_windows(tmp_path, 7, ws)
    assert paths and all("resolution=10s" in str(p) and "date=" in str(p) for p in paths)
    before = {p: p.read_bytes() for p in paths}
    back = read_windows(tmp_path)
    stored = [w for w in ws if w.series.partition != "all"]
    assert len(back) == len(stored) == 6
    key = lambda w: (w.window_start_us, w.series.partition)  # noqa: E731
    for a, b in zip(sorted(stored, key=key), sorted(back, key=key), strict=True):
        assert np.array_equal(a.hist.index, b.hist.index)
        assert np.array_equal(a.hist.count, b.hist.count)
        assert (a.hist.max_us, a.hist.sum_us, a.lost) == (b.hist.max_us, b.hist.sum_us, b.lost)
    write_windows(tmp_path, 7, ws)  # a Spark replay of batch 7
    assert {p: p.read_bytes() for p in paths} == before
    assert len(read_windows(tmp_path)) == 6
    assert len(read_windows(tmp_path, start_us=T0 + 10_000_000, end_us=T0 + 20_000_000)) == 2
    assert read_windows(tmp_path, resolution="1m") == []


def test_hlog_export_reads_back_with_hdrh(tmp_path: Path) -> None:
    ws = [w for w in windows(1) if w.series.partition == "0"]
    path = export_hlog(ws, tmp_path / "e2e.hlog")
    reader = HistogramLogReader(str(path), HdrHistogram(1, 3_600_000_000, 3))
    got = []
    while (h := reader.get_next_interval_histogram()) is not None:
        got.append(h)
    assert [h.get_total_count() for h in got] == [w.hist.total for w in ws]
    for h, w in zip(got, ws, strict=True):
        assert h.get_value_at_percentile(99.9) == to_hdrh(w.hist).get_value_at_percentile(99.9)


def test_known_good_encoded_histogram_decodes() -> None:
    data = Path(__file__).parents[2] / "data"
    encoded = (data / "known_good_histogram.txt").read_text().strip()
    h = HdrHistogram.decode(encoded)
    # recorded by tests/data/README.md's recipe: values 1..10000 µs once each
    assert h.get_total_count() == 10_000
    assert h.get_value_at_percentile(50) == h.get_highest_equivalent_value(5000)
    assert h.get_max_value() == h.get_highest_equivalent_value(10_000)


def test_broker_rollups_are_archived_and_read_back_only_when_asked(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    cells = [
        WindowHistogram(
            "10s", T0, T0 + 10_000_000, SeriesKey("c", "t", p, "e2e", b),
            SparseHistogram.from_values(LAYOUT, rng.lognormal(7, 1, n).astype(np.int64) + 1),
            lost=lost,
        )
        for p, b, n, lost in (("0", "1", 300, 1), ("0", "3", 200, 2), ("1", "3", 100, 4))
    ]  # fmt: skip
    ws = with_rollups(cells)
    write_windows(tmp_path, 3, ws)
    plain = read_windows(tmp_path)  # what the report reads: each sample once
    assert sorted(w.series.partition for w in plain) == ["0", "1"]
    assert sum(w.hist.total for w in plain) == 600
    back = {w.series.broker: w for w in read_windows(tmp_path, brokers=True) if w.series.broker}
    assert set(back) == {"1", "3"}
    for w in ws:
        if w.series.is_broker:
            b = back[w.series.broker]
            assert b.series == w.series and b.lost == w.lost
            assert np.array_equal(b.hist.count, w.hist.count) and b.hist.max_us == w.hist.max_us
    assert (back["3"].hist.total, back["3"].lost) == (300, 6)
