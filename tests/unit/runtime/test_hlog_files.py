"""`.hlog` interval logs: what we write, hdrh's reader (and ours) read back window for window."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from core.hdr import HdrLayout, SparseHistogram
from core.hlog import HlogInterval
from runtime.hlog_files import read_hlog, write_hlog

LAYOUT = HdrLayout()
T0_US = 1_795_000_000_000_000


def intervals() -> list[HlogInterval]:
    rng = np.random.default_rng(3)
    out = []
    for i in (2, 0, 1):  # written in time order whatever the input order
        v = rng.lognormal(7, 1.2, 1500).astype(np.int64) + 1
        start = T0_US + i * 10_000_000
        out.append(HlogInterval(start, start + 10_000_000, SparseHistogram.from_values(LAYOUT, v)))
    return out


def test_write_then_read_keeps_times_and_buckets(tmp_path: Path) -> None:
    written = intervals()
    back = read_hlog(write_hlog(written, tmp_path / "x.hlog"))
    assert [i.start_us for i in back] == sorted(i.start_us for i in written)
    for got, want in zip(back, sorted(written, key=lambda i: i.start_us), strict=True):
        assert (got.start_us, got.end_us) == (want.start_us, want.end_us)
        assert np.array_equal(got.hist.index, want.hist.index)
        assert np.array_equal(got.hist.count, want.hist.count)


def test_the_log_reads_as_hdrhistogram_tools_expect(tmp_path: Path) -> None:
    sub_ms = SparseHistogram.from_values(LAYOUT, [100, 900])
    path = write_hlog([HlogInterval(T0_US, T0_US + 1_000_000, sub_ms)], tmp_path / "x.hlog")
    lines = path.read_text().splitlines()
    assert lines[0] == "#[Histogram log format version 1.2]"
    assert lines[1].startswith("#[StartTime: 1795000000.000 (seconds since epoch), 2026-")
    assert lines[2].startswith("#[BaseTime: 1795000000.000")
    assert lines[3].startswith('"StartTimestamp","Interval_Length","Interval_Max"')
    # Interval_Max in ms to the µs, not floored to whole ms as hdrh 0.10's writer does
    assert lines[4].startswith("0.000,1.000,0.900,HIST")


def test_nothing_to_write_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no intervals"):
        write_hlog([], tmp_path / "x.hlog")
