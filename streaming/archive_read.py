"""Reading the archive back (report and slo): windows by resolution and time, every row checked.

Files are chosen by path (``streaming.archive_files``) before any is opened; a batch file a
compacted one covers is never read, so a crash or replay in between is read once. Per-topic
rollups are not stored: readers merge partitions themselves; per-broker rollups are returned
only when asked, so merging everything returned by default counts each sample once.

A file that cannot be read, has the wrong schema, or holds an inconsistent histogram is an
:class:`ArchiveError` naming the file; ``scan_windows`` can collect those instead of raising.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from core.hdr import HdrLayout, LayoutError, SparseHistogram
from core.hlog import HlogInterval, write_hlog
from core.units import parse_duration_s
from core.windows import SeriesKey, WindowHistogram
from runtime.files import MAX_ARCHIVE_FILE_BYTES, open_regular
from streaming.archive_files import (
    DAY_US,
    FILE_SCHEMA,
    HOUR_US,
    OPTIONAL_COLUMNS,
    READ_COLUMNS,
    ArchiveError,
    date_start_us,
    dir_start_us,
    key_value,
    select_files,
)


@dataclass
class ArchiveRead:
    """What a scan found: the windows, and the files it left out (``skip_bad``) with why."""

    windows: list[WindowHistogram] = field(default_factory=list)
    bad: list[ArchiveError] = field(default_factory=list)


#: What a damaged file can make pyarrow raise: its own errors, and a corrupt string or length
#: surfacing as a Python error (UnicodeDecodeError, found by flipping bytes) before it checks.
_DECODE_ERRORS = (OSError, pa.ArrowException, ValueError, IndexError, KeyError, OverflowError)


def read_table(path: Path, columns: list[str] | None = READ_COLUMNS) -> pa.Table:
    """A file's table with its schema checked; ArchiveError if unreadable or of another schema."""
    try:  # a regular file, checked on the descriptor pyarrow then reads (a FIFO would block)
        source = os.fdopen(open_regular(path, MAX_ARCHIVE_FILE_BYTES), "rb")
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _unreadable(path, exc) from None
    with source:
        return _read_open_table(path, source, columns)


def _read_open_table(path: Path, source: Any, columns: list[str] | None) -> pa.Table:
    try:
        schema = pq.read_schema(source)
    except FileNotFoundError:
        raise
    except _DECODE_ERRORS as exc:
        raise _unreadable(path, exc) from None
    for f in FILE_SCHEMA:
        if f.name not in schema.names:
            if f.name in OPTIONAL_COLUMNS:
                continue
            raise ArchiveError(path, f"wrong schema: no column {f.name!r}")
        got = schema.field(f.name).type
        if got != f.type:
            raise ArchiveError(path, f"wrong schema: column {f.name!r} is {got}, not {f.type}")
    wanted = None if columns is None else [c for c in columns if c in schema.names]
    try:
        source.seek(0)
        table = pq.read_table(source, columns=wanted)
    except FileNotFoundError:
        raise
    except _DECODE_ERRORS as exc:
        raise _unreadable(path, exc) from None
    if "broker" not in table.column_names:  # written before broker rollups
        table = table.append_column("broker", pa.array([""] * table.num_rows, pa.string()))
    return table


def _unreadable(path: Path, exc: Exception) -> ArchiveError:
    if isinstance(exc, OSError) and not isinstance(exc, pa.ArrowException) and exc.strerror:
        return ArchiveError(path, f"cannot read: {exc.strerror}")
    return ArchiveError(path, "not a readable Parquet file (corrupt or truncated)")


def check_row(r: dict[str, Any], span_us: int | None, layout: HdrLayout) -> str | None:
    """Why a row's window or histogram is inconsistent, or None: the arrays must agree."""
    for name in READ_COLUMNS:
        if name != "broker" and r.get(name) is None:
            return f"{name} is null"
    index, count = r["bucket_index"], r["bucket_count"]
    if len(index) != len(count):
        return f"bucket_index has {len(index)} entries but bucket_count {len(count)}"
    if r["window_end_us"] <= r["window_start_us"]:
        return "window_end_us is not after window_start_us"
    if span_us is not None and r["window_end_us"] - r["window_start_us"] != span_us:
        return f"window spans {r['window_end_us'] - r['window_start_us']} µs, not {span_us}"
    if r["lost"] < 0:
        return f"lost is negative ({r['lost']})"
    idx = np.asarray(index, dtype=np.int64)
    cnt = np.asarray(count, dtype=np.int64)
    if cnt.size and int(cnt.min()) <= 0:
        return "bucket_count holds a count <= 0"
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) > layout.overflow_index):
        return f"bucket_index outside the layout's 0..{layout.overflow_index}"
    if idx.size > 1 and not bool(np.all(np.diff(idx) > 0)):
        return "bucket_index is not strictly increasing"
    total = int(cnt.sum())
    if r["samples"] != total:
        return f"samples is {r['samples']} but bucket_count sums to {total}"
    over = int(cnt[idx == layout.overflow_index].sum())
    if r["overflow"] != over:
        return f"overflow is {r['overflow']} but the overflow bucket holds {over}"
    if total == 0:
        return None  # lost-only windows carry no samples; their max_us means nothing
    top = int(idx[-1])
    if top == layout.overflow_index:
        if r["max_us"] <= layout.highest_us:
            return f"max_us {r['max_us']} is not above highest_us with samples in overflow"
    else:
        low, high = int(layout.lowest_value_at(top)), int(layout.highest_value_at(top))
        # bucket 0 also holds values below 1 µs (clamped), whose max is the raw value
        if r["max_us"] > high or (r["max_us"] < low and top != 0):
            return f"max_us {r['max_us']} is outside its highest bucket [{low}, {high}]"
    return None


def file_windows(
    path: Path,
    resolution: str,
    span_us: int | None,
    part_us: tuple[int, int] | None,
    layouts: dict[tuple[int, int, int], HdrLayout],
) -> list[WindowHistogram]:
    """A file's windows, every row checked first: a bad row makes the whole file bad."""
    table = read_table(path)
    try:
        rows = table.to_pylist()
    except _DECODE_ERRORS as exc:
        raise _unreadable(path, exc) from None
    out = []
    for i, r in enumerate(rows):
        key = (r.get("lowest_us"), r.get("highest_us"), r.get("digits"))
        if None in key:
            raise ArchiveError(path, f"row {i}: layout is null")
        try:
            layout = layouts.get(key) or layouts.setdefault(key, HdrLayout(*key))  # type: ignore[arg-type]
        except LayoutError as exc:
            raise ArchiveError(path, f"row {i}: {exc}") from None
        if why := check_row(r, span_us, layout):
            raise ArchiveError(path, f"row {i}: {why}")
        if part_us and not part_us[0] <= r["window_start_us"] < part_us[1]:
            raise ArchiveError(path, f"row {i}: window starts outside its directory's hour or date")
        hist = SparseHistogram(
            layout,
            np.asarray(r["bucket_index"], dtype=np.int64),
            np.asarray(r["bucket_count"], dtype=np.int64),
            r["max_us"],
            r["sum_us"],
        )
        series = SeriesKey(r["cluster"], r["topic"], r["partition"], r["kind"], r["broker"] or "")
        out.append(
            WindowHistogram(
                resolution, r["window_start_us"], r["window_end_us"], series, hist, r["lost"]
            )
        )
    return out


def resolution_span_us(resolution: str) -> int | None:
    try:
        seconds = parse_duration_s(resolution)
    except ValueError:
        return None
    return int(seconds * 1e6) if seconds > 0 else None


def _candidate_dirs(
    res_dir: Path, span_us: int, start_us: int | None, end_us: int | None
) -> Iterator[tuple[Path, tuple[int, int] | None]]:
    """(directory, its [start, end) of window starts) of every partition that may overlap."""
    lo = None if start_us is None else start_us - span_us  # a window starting here may overlap
    for date_dir in sorted(res_dir.iterdir()):
        day = date_start_us(key_value(date_dir.name, "date") or "")
        if not date_dir.is_dir() or day is None:
            continue
        if (lo is not None and day + DAY_US <= lo) or (end_us is not None and day >= end_us):
            continue
        yield date_dir, (day, day + DAY_US)  # files written before hour partitions
        for h in sorted(date_dir.glob("hour=*")):
            hstart = dir_start_us(h)
            if hstart is None or not h.is_dir():
                continue
            if (lo is not None and hstart + HOUR_US <= lo) or (
                end_us is not None and hstart >= end_us
            ):
                continue
            yield h, (hstart, hstart + HOUR_US)


def scan_windows(
    archive_dir: str | Path,
    resolution: str | None = None,
    start_us: int | None = None,
    end_us: int | None = None,
    brokers: bool = False,
    skip_bad: bool = False,
) -> ArchiveRead:
    """Archived windows overlapping [start_us, end_us), optionally of one resolution.

    Files are chosen by path (resolution, date, hour) and name before any is opened. A bad file
    raises ArchiveError, or with ``skip_bad`` is left out whole and listed in ``bad``. Per-broker
    rollups only with ``brokers``: they hold the same samples as the partitions.
    """
    root = Path(archive_dir)
    found = ArchiveRead()
    if not root.is_dir():
        return found
    layouts: dict[tuple[int, int, int], HdrLayout] = {}
    for res_dir in sorted(root.glob("resolution=*")):
        res = key_value(res_dir.name, "resolution") or ""
        if (resolution is not None and res != resolution) or not res_dir.is_dir():
            continue
        span_us = resolution_span_us(res)
        if span_us is None:
            err = ArchiveError(res_dir, "not a resolution (resolution=10s, 1m, 1h, ...)")
            if not skip_bad:
                raise err
            found.bad.append(err)
            continue
        for directory, part_us in _candidate_dirs(res_dir, span_us, start_us, end_us):
            for w in _read_dir(directory, res, span_us, part_us, layouts, found, skip_bad):
                if start_us is not None and w.window_end_us <= start_us:
                    continue
                if end_us is not None and w.window_start_us >= end_us:
                    continue
                if w.series.broker and not brokers:
                    continue
                found.windows.append(w)
    found.windows.sort(key=lambda w: w.sort_key)
    return found


def _read_dir(
    directory: Path,
    resolution: str,
    span_us: int,
    part_us: tuple[int, int] | None,
    layouts: dict[tuple[int, int, int], HdrLayout],
    found: ArchiveRead,
    skip_bad: bool,
) -> list[WindowHistogram]:
    """One partition directory's windows; re-planned if a compaction or prune ran meanwhile."""
    for _attempt in range(5):
        try:
            names = sorted(p.name for p in directory.iterdir())  # not regular: refused
        except FileNotFoundError:
            return []  # pruned while we read
        try:
            chosen = select_files(names)
        except ArchiveError as exc:
            err = ArchiveError(directory / exc.path, exc.reason)
            if not skip_bad:
                raise err from None
            found.bad.append(err)
            return []
        out: list[WindowHistogram] = []
        bad: list[ArchiveError] = []
        try:
            for name in chosen:
                try:
                    out.extend(
                        file_windows(directory / name, resolution, span_us, part_us, layouts)
                    )
                except ArchiveError as exc:
                    if not skip_bad:
                        raise
                    bad.append(exc)
        except FileNotFoundError:
            continue  # a compaction replaced the file: plan the directory again
        found.bad.extend(bad)
        return out
    raise ArchiveError(directory, "changed under every one of 5 reads")


def export_hlog(windows: Sequence[WindowHistogram], path: str | Path) -> Path:
    """An HdrHistogram interval log (.hlog) with one interval per window, in time order."""
    if not windows:
        raise ValueError("no windows to export")
    return write_hlog(
        (HlogInterval(w.window_start_us, w.window_end_us, w.hist) for w in windows), path
    )
