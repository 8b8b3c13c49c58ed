"""A real archive file of many row groups, built fast, and a reader measured in its own process.

``write_file`` writes FILE_SCHEMA rows with the archive writer's options, in row groups of at
most ``rows_per_group`` rows, each row a consistent histogram of ``buckets`` buckets (what
``check_row`` accepts): tens of MB in about a second, where ``write_windows`` takes a minute.
``python -m tests.unit.archive.big_archive read|compact PATH`` reads one file (or compacts its
directory) and prints, as JSON, the peak memory of pyarrow's pool and of Python (tracemalloc,
numpy included) and what the windows returned hold.
"""

from __future__ import annotations

import json
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from core.hdr import HdrLayout
from streaming.archive import WRITE_OPTIONS
from streaming.archive_files import FILE_SCHEMA

LAYOUT = HdrLayout()
HOUR_US = 3_600_000_000
T0_US = 1_795_000_000_000_000 // HOUR_US * HOUR_US
SPAN_US = 10_000_000


def table(rows: int, buckets: int, seed: int = 0, first: int = 0) -> pa.Table:
    """``rows`` windows of 10s (one series each of 50 partitions) of ``buckets`` buckets each."""
    rng = np.random.default_rng(seed)
    # strictly increasing, below the overflow bucket (the layout has 23,553 buckets)
    top = LAYOUT.overflow_index
    index = np.sort(rng.random((rows, top)).argpartition(buckets, axis=1)[:, :buckets], axis=1)
    count = rng.integers(1, 100, (rows, buckets))
    n = np.arange(first, first + rows)
    start = T0_US + (n // 50) * SPAN_US
    max_us = [int(LAYOUT.highest_value_at(int(i))) for i in index[:, -1]]
    offsets = pa.array(np.arange(rows + 1) * buckets, pa.int32())
    cols = {
        "window_start_us": start,
        "window_end_us": start + SPAN_US,
        "cluster": ["c"] * rows,
        "topic": ["t"] * rows,
        "partition": [str(p) for p in n % 50],
        "kind": ["e2e"] * rows,
        "broker": [""] * rows,
        "samples": count.sum(axis=1),
        "lost": np.zeros(rows, np.int64),
        "max_us": max_us,
        "sum_us": count.sum(axis=1) * 1000,
        "overflow": np.zeros(rows, np.int64),
        "lowest_us": np.full(rows, LAYOUT.lowest_us),
        "highest_us": np.full(rows, LAYOUT.highest_us),
        "digits": np.full(rows, LAYOUT.digits, np.int32),
        "bucket_index": pa.ListArray.from_arrays(offsets, pa.array(index.ravel())),
        "bucket_count": pa.ListArray.from_arrays(offsets, pa.array(count.ravel())),
        "hdr": [b"\x00" * 16] * rows,
    }
    return pa.table({f.name: pa.array(cols[f.name], f.type) for f in FILE_SCHEMA}, FILE_SCHEMA)


def write_file(path: Path, groups: int, rows_per_group: int, buckets: int, first: int = 0) -> Path:
    """An archive file of ``groups`` row groups (see the module), its rows numbered from
    ``first`` (row n starts 10s window n // 50)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with pq.ParquetWriter(path, FILE_SCHEMA, **WRITE_OPTIONS) as writer:
        for g in range(groups):
            t = table(rows_per_group, buckets, seed=g, first=first + g * rows_per_group)
            writer.write_table(t, row_group_size=rows_per_group)
    return path


def _measure(what: str, path: Path) -> dict[str, float]:
    from streaming.archive import compact_dir
    from streaming.archive_read import file_windows

    tracemalloc.start()
    if what == "read":
        windows = file_windows(path, "10s", SPAN_US, None, {})
        held = sum(w.hist.index.nbytes + w.hist.count.nbytes for w in windows)
        n = len(windows)
    else:
        compact_dir(path.parent)
        held = n = 0
    current, peak = tracemalloc.get_traced_memory()
    return {
        "windows": n,
        "held_bytes": held,
        "python_now_bytes": current,
        "python_peak_bytes": peak,
        "arrow_peak_bytes": pa.default_memory_pool().max_memory(),
    }


if __name__ == "__main__":
    print(json.dumps(_measure(sys.argv[1], Path(sys.argv[2]))))
