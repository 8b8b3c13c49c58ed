"""Archive files read in bounded memory: row group by row group, sizes checked before reading.

Memory is measured in a process of its own (``big_archive``): pyarrow's pool peak and Python's
(tracemalloc, numpy included) against a real file of many row groups that decodes to several
times the bound, so a reader that decodes a whole file fails. Results are compared with the
whole-file read the reader replaced (``pq.read_table`` then one dict per row).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.hdr import HdrLayout, LayoutError, SparseHistogram
from core.sla import parse_sla
from core.windows import ALL_PARTITIONS, SeriesKey, WindowHistogram
from monitor.report.curves import merge_curves, select
from monitor.slo import attainment, attainments
from runtime.files import (
    ARCHIVE_BATCH_VALUES,
    MAX_ARCHIVE_PAGE_BYTES,
    MAX_ARCHIVE_ROW_BUCKETS,
    MiB,
    size_text,
)
from streaming.archive import WRITE_OPTIONS, compact_dir, write_windows
from streaming.archive_files import FILE_SCHEMA, READ_COLUMNS, ArchiveError, hour_dir
from streaming.archive_read import file_windows, iter_windows, scan_windows
from tests.unit.archive import big_archive
from tests.unit.archive.big_archive import HOUR_US, SPAN_US, T0_US

REPO = Path(__file__).resolve().parents[3]
#: One batch's bucket columns decoded: what a read may hold beyond the windows it returns.
ONE_BATCH_BYTES = 2 * ARCHIVE_BATCH_VALUES * 8
#: Row groups of ~1 Mi buckets each (50 rows of 20,000): 256 MB of buckets decoded, 31 MB on disk.
GROUPS, ROWS, BUCKETS = 16, 50, 20_000


def old_rows(path: Path) -> list[tuple[object, ...]]:
    """What the whole-file reader this module replaced made of a file, one tuple per row."""
    names = pq.read_schema(path).names
    table = pq.read_table(path, columns=[c for c in READ_COLUMNS if c in names])
    return [
        (
            r["window_start_us"], r["window_end_us"], r["cluster"], r["topic"], r["partition"],
            r["kind"], r.get("broker") or "", r["samples"], r["lost"], r["max_us"], r["sum_us"],
            r["lowest_us"], r["highest_us"], r["digits"],
            tuple(r["bucket_index"]), tuple(r["bucket_count"]),
        )
        for r in table.to_pylist()
    ]  # fmt: skip


def new_rows(windows: list[WindowHistogram]) -> list[tuple[object, ...]]:
    out = []
    for w in windows:
        h, s = w.hist, w.series
        out.append(
            (
                w.window_start_us, w.window_end_us, s.cluster, s.topic, s.partition, s.kind,
                s.broker, h.total, w.lost, h.max_us, h.sum_us,
                h.layout.lowest_us, h.layout.highest_us, h.layout.digits,
                tuple(h.index.tolist()), tuple(h.count.tolist()),
            )
        )  # fmt: skip
    return out


def windows(n: int, seed: int) -> list[WindowHistogram]:
    """``n`` windows of one hour, of every kind the stream writes: wide and narrow histograms, two
    layouts, lost-only windows (no buckets), samples in overflow, broker rollups."""
    rng = np.random.default_rng(seed)
    layouts = [HdrLayout(), HdrLayout(digits=2, highest_us=60_000_000)]
    out = []
    for i in range(n):
        layout = layouts[i % 2]
        start = T0_US + (i // 20) * SPAN_US
        sigma = 3.0 if i % 3 else 0.5
        values = rng.lognormal(8, sigma, 3000 if i % 7 else 0).astype(np.int64) + 1
        if i % 11 == 0:
            values = np.append(values, layout.highest_us + 5)
        broker = str(i % 3) if i % 5 == 0 else ""
        series = SeriesKey("c", "t", ALL_PARTITIONS if broker else str(i % 20), "e2e", broker)
        hist = SparseHistogram.from_values(layout, values)
        out.append(WindowHistogram("10s", start, start + SPAN_US, series, hist, lost=i % 4))
    return out


def test_reads_match_the_whole_file_read_over_several_row_groups(tmp_path: Path) -> None:
    ws = windows(800, seed=1)
    (path,) = write_windows(tmp_path, 7, ws)
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups >= 2  # the writer cut the batch at ARCHIVE_BATCH_VALUES buckets
    for g in range(meta.num_row_groups):
        assert meta.row_group(g).column(16).num_values <= ARCHIVE_BATCH_VALUES
    got = file_windows(path, "10s", SPAN_US, None, {})
    assert new_rows(got) == old_rows(path)
    assert sorted(new_rows(got)) == sorted(new_rows(ws))


def test_a_row_group_over_the_batch_is_read_a_row_at_a_time_with_the_same_result(
    tmp_path: Path,
) -> None:
    # as written before bounded row groups: 60 rows of 20,000 buckets in one row group
    path = hour_dir(tmp_path, "10s", T0_US) / "batch-000000001.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(big_archive.table(60, BUCKETS), path, **WRITE_OPTIONS)
    assert pq.ParquetFile(path).metadata.row_group(0).column(16).num_values > ARCHIVE_BATCH_VALUES
    assert new_rows(file_windows(path, "10s", SPAN_US, None, {})) == old_rows(path)


def test_files_without_the_broker_column_read_as_before(tmp_path: Path) -> None:
    path = hour_dir(tmp_path, "10s", T0_US) / "batch-000000001.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(big_archive.table(30, 500).drop_columns(["broker"]), path, **WRITE_OPTIONS)
    got = scan_windows(tmp_path).windows
    assert sorted(new_rows(got)) == sorted(old_rows(path)) and len(got) == 30


def test_compaction_keeps_every_row_and_writes_bounded_row_groups(tmp_path: Path) -> None:
    batches = [windows(400, seed=b) for b in range(3)]
    for b, ws in enumerate(batches):
        write_windows(tmp_path, b, ws)
    directory = hour_dir(tmp_path, "10s", T0_US)
    before = sorted(r for p in sorted(directory.iterdir()) for r in old_rows(p))
    out = compact_dir(directory)
    assert out is not None and [p.name for p in directory.iterdir()] == [out.name]
    assert sorted(old_rows(out)) == before
    meta = pq.ParquetFile(out).metadata
    assert meta.num_row_groups >= 2
    for g in range(meta.num_row_groups):
        assert meta.row_group(g).column(16).num_values <= ARCHIVE_BATCH_VALUES


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real archive file of 16 row groups that decodes to 256 MB of buckets (31 MB on disk)."""
    root = tmp_path_factory.mktemp("big")
    path = hour_dir(root, "10s", T0_US) / "batch-000000001.parquet"
    return big_archive.write_file(path, GROUPS, ROWS, BUCKETS)


def measure(what: str, path: Path) -> dict[str, int]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.unit.archive.big_archive", what, str(path)],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=120, check=True,
    )  # fmt: skip
    result: dict[str, int] = json.loads(done.stdout)
    return result


def test_a_read_holds_one_batch_beyond_the_windows_it_returns(big_file: Path) -> None:
    got = measure("read", big_file)
    decoded = GROUPS * ROWS * BUCKETS * 16  # both bucket columns, as int64
    assert got["windows"] == GROUPS * ROWS and got["held_bytes"] == decoded
    bound = 4 * ONE_BATCH_BYTES  # 64 MiB: a batch, its levels, one read buffer per column
    assert decoded >= 3 * bound  # a reader that decodes the whole file cannot pass
    assert got["arrow_peak_bytes"] <= bound, got
    assert got["python_peak_bytes"] - got["python_now_bytes"] <= ONE_BATCH_BYTES, got


def test_compaction_holds_a_row_group_and_a_batch_whatever_its_inputs(
    big_file: Path, tmp_path: Path
) -> None:
    directory = hour_dir(tmp_path, "10s", T0_US)
    directory.mkdir(parents=True)
    for b in (1, 2):
        shutil.copy(big_file, directory / f"batch-{b:09d}.parquet")
    got = measure("compact", directory / "batch-000000001.parquet")
    decoded = 2 * GROUPS * ROWS * BUCKETS * 16
    bound = 6 * ONE_BATCH_BYTES  # 96 MiB: the row group being written, a batch read, buffers
    assert decoded >= 3 * bound
    assert got["arrow_peak_bytes"] <= bound, got
    assert got["python_peak_bytes"] <= 2 * ONE_BATCH_BYTES, got
    (out,) = directory.iterdir()
    assert out.name == "compact-000000001-000000002.parquet"
    assert pq.ParquetFile(out).metadata.num_rows == 2 * GROUPS * ROWS


def test_a_single_row_of_more_buckets_than_any_layout_is_refused_before_decoding(
    tmp_path: Path,
) -> None:
    n = MAX_ARCHIVE_ROW_BUCKETS + 1
    row = big_archive.table(1, 10).to_pylist()[0]
    row["bucket_index"], row["bucket_count"] = list(range(n)), [1] * n
    path = tmp_path / "batch-000000001.parquet"
    pq.write_table(pa.Table.from_pylist([row], schema=FILE_SCHEMA), path, **WRITE_OPTIONS)
    with pytest.raises(ArchiveError) as caught:
        file_windows(path, "10s", SPAN_US, None, {})
    assert str(caught.value) == (
        f"{path}: row group 0: bucket_index.list.element declares {n} buckets in 1 rows, "
        f"over {MAX_ARCHIVE_ROW_BUCKETS} a row"
    )


def test_a_row_group_of_any_size_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """As the writer before bounded row groups wrote an hour of many series: one row group of
    850 rows and 17 M buckets, read a row at a time, holding one row beyond the windows."""
    path = hour_dir(tmp_path, "10s", T0_US) / "batch-000000001.parquet"
    path.parent.mkdir(parents=True)
    rows = 850
    pq.write_table(big_archive.table(rows, BUCKETS), path, row_group_size=rows, **WRITE_OPTIONS)
    assert pq.ParquetFile(path).metadata.num_row_groups == 1
    got = measure("read", path)
    decoded = rows * BUCKETS * 16
    assert decoded > 16 * MiB * 16  # over what the row group cap used to refuse
    assert got["windows"] == rows and got["held_bytes"] == decoded
    bound = 4 * ONE_BATCH_BYTES
    assert decoded >= 3 * bound
    assert got["arrow_peak_bytes"] <= bound, got
    assert got["python_peak_bytes"] - got["python_now_bytes"] <= ONE_BATCH_BYTES, got


def test_a_page_over_its_cap_is_refused_before_decoding(tmp_path: Path) -> None:
    """pyarrow decodes a page whole: one of 12 rows of 819,201 plain int64 buckets (79 MB)."""
    n, rows = MAX_ARCHIVE_ROW_BUCKETS, 12
    row = big_archive.table(1, 10).to_pylist()[0]
    row["bucket_index"], row["bucket_count"] = list(range(n)), [1] * n
    path = tmp_path / "batch-000000001.parquet"
    options = {**WRITE_OPTIONS, "column_encoding": {"bucket_index": "PLAIN"}}
    options["use_dictionary"] = list(options["use_dictionary"])
    pq.write_table(
        pa.Table.from_pylist([row] * rows, schema=FILE_SCHEMA),
        path,
        data_page_size=1 << 30,
        **options,
    )
    with pytest.raises(ArchiveError) as caught:
        file_windows(path, "10s", SPAN_US, None, {})
    message = str(caught.value)
    assert message.startswith(f"{path}: row group 0: bucket_index.list.element: a page declares ")
    assert message.endswith(f"bytes, over its cap of {size_text(MAX_ARCHIVE_PAGE_BYTES)}")


def test_a_null_inside_a_bucket_array_is_named(tmp_path: Path) -> None:
    rows = big_archive.table(5, 10).to_pylist()
    rows[3]["bucket_count"][4] = None
    path = tmp_path / "batch-000000001.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=FILE_SCHEMA), path, **WRITE_OPTIONS)
    with pytest.raises(ArchiveError, match=r"batch-000000001\.parquet: row 3: bucket_count holds"):
        file_windows(path, "10s", SPAN_US, None, {})


#: A day of 16 hour partitions, each one window of 50 partitions of 2,000 buckets.
HOURS, HOUR_ROWS, HOUR_BUCKETS = 16, 50, 2000


@pytest.fixture(scope="module")
def day_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("day")
    for h in range(HOURS):
        first = h * (HOUR_US // SPAN_US) * 50
        path = hour_dir(root, "10s", T0_US + h * HOUR_US) / "batch-000000001.parquet"
        big_archive.write_file(path, 1, HOUR_ROWS, HOUR_BUCKETS, first=first)
    return root


def held_bytes(windows: list[WindowHistogram]) -> int:
    held = sum(w.hist.index.nbytes + w.hist.count.nbytes for w in windows)
    assert held == HOURS * HOUR_ROWS * HOUR_BUCKETS * 16
    return held


def test_slo_merges_an_hour_at_a_time_with_the_same_attainment(day_archive: Path) -> None:
    sla = parse_sla(
        {
            "windows": ["10s"],
            "objectives": [
                {"name": "fast", "quantile": 0.99, "threshold": "10ms", "window": "10s"},
                {"name": "cap", "max": "1s", "window": "10s"},
                {"name": "p7", "partition": 7, "max": "1h", "window": "10s"},
                {"name": "loss", "loss_ratio": 0.01},
            ],
        }
    )
    listed = scan_windows(day_archive).windows
    expected = [attainment(o, listed) for o in sla.objectives]
    held = held_bytes(listed)
    del listed
    tracemalloc.start()
    try:
        got = attainments(sla.objectives, iter_windows(day_archive))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == expected and got[0]["samples"] > 0 and got[2]["samples"] > 0
    assert peak <= held / 4, (peak, held)  # an hour and one merged window per objective


@pytest.mark.parametrize("by", ["series", "window"])
def test_report_merges_an_hour_at_a_time_with_the_same_curves(day_archive: Path, by: str) -> None:
    listed = scan_windows(day_archive).windows
    expected, n = merge_curves(listed, by, None)
    expected_rows = new_rows(list(expected.values()))
    held = held_bytes(listed)
    del listed, expected
    tracemalloc.start()
    try:
        got, m = merge_curves(select(iter_windows(day_archive), kind="e2e"), by, None)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert m == n == HOURS * HOUR_ROWS and new_rows(list(got.values())) == expected_rows
    curves = sum(w.hist.index.nbytes + w.hist.count.nbytes for w in got.values())
    assert peak - curves <= held / 4, (peak, curves, held)  # the curves, and an hour


def test_the_row_bucket_cap_is_the_widest_layouts_bucket_count() -> None:
    # the archive's highest_us is an int64 and digits at most 4: no row's layout is wider
    widest = HdrLayout(lowest_us=1, highest_us=2**63 - 1, digits=4)
    assert widest.overflow_index + 1 == MAX_ARCHIVE_ROW_BUCKETS
    with pytest.raises(LayoutError):
        HdrLayout(digits=5)
