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
import pyarrow.compute as pc
import pyarrow.parquet as pq

from core.hdr import HdrLayout, LayoutError, SparseHistogram
from core.hlog import HlogInterval
from core.labels import MAX_LABEL_BYTES
from core.units import parse_duration_s
from core.windows import SeriesKey, WindowHistogram
from runtime.files import (
    ARCHIVE_BATCH_ROWS,
    ARCHIVE_BATCH_VALUES,
    MAX_ARCHIVE_EXPANDED_BYTES,
    MAX_ARCHIVE_FILE_BYTES,
    MAX_ARCHIVE_FOOTER_BYTES,
    MAX_ARCHIVE_ROW_BUCKETS,
    KiB,
    open_regular,
    size_text,
)
from runtime.hlog_files import write_hlog
from streaming.archive_files import (
    BUCKET_COLUMNS,
    DAY_US,
    FILE_SCHEMA,
    HOUR_US,
    LABEL_COLUMNS,
    OPTIONAL_COLUMNS,
    READ_COLUMNS,
    ArchiveError,
    date_start_us,
    dir_start_us,
    key_value,
    select_files,
)
from streaming.archive_pages import PageError, check_pages


@dataclass
class ArchiveRead:
    """What a scan found: the windows, and the files it left out (``skip_bad``) with why."""

    windows: list[WindowHistogram] = field(default_factory=list)
    bad: list[ArchiveError] = field(default_factory=list)


#: What a damaged file can make pyarrow raise: its own errors, and a corrupt string or length
#: surfacing as a Python error (UnicodeDecodeError, found by flipping bytes) before it checks.
_DECODE_ERRORS = (OSError, pa.ArrowException, ValueError, IndexError, KeyError, OverflowError)
#: No label the stream writes is longer (core.labels: a topic name).
_MAX_LABEL_BYTES = max(MAX_LABEL_BYTES.values())
#: pyarrow's buffered reads: a column chunk streams through this much, never read whole.
_READ_BUFFER_BYTES = 256 * KiB


def iter_batches(path: Path, columns: Sequence[str] = READ_COLUMNS) -> Iterator[pa.RecordBatch]:
    """A file's rows, batch by batch, in bounded memory; ArchiveError if unreadable, of another
    schema, or declaring sizes over the caps of ``runtime.files`` (checked before reading).

    Each batch holds at most ``ARCHIVE_BATCH_ROWS`` rows and ``ARCHIVE_BATCH_VALUES`` buckets per
    bucket column (a row group that may hold more is read a few rows at a time); labels are
    read as dictionaries and checked before they are expanded. Columns are FILE_SCHEMA's types;
    ``broker`` is filled with "" in files written before broker rollups.
    """
    try:  # a regular file, checked on the descriptor pyarrow then reads (a FIFO would block)
        source = os.fdopen(open_regular(path, MAX_ARCHIVE_FILE_BYTES), "rb")
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _unreadable(path, exc) from None
    with source:
        yield from _read_open(path, source, list(columns))


def _read_open(path: Path, source: Any, columns: list[str]) -> Iterator[pa.RecordBatch]:
    _check_footer_size(path, source)
    try:
        plain = pq.ParquetFile(source, pre_buffer=False)
        schema = plain.schema_arrow
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
    wanted = [c for c in columns if c in schema.names]
    meta = plain.metadata
    try:  # variable-width columns as dictionaries: a repeated value is expanded once checked
        pf = pq.ParquetFile(
            source,
            metadata=meta,
            read_dictionary=[c for c in wanted if c in LABEL_COLUMNS or c == "hdr"],
            buffer_size=_READ_BUFFER_BYTES,
            pre_buffer=False,
        )
    except _DECODE_ERRORS as exc:
        raise _unreadable(path, exc) from None
    checked = set(wanted)
    for g in range(meta.num_row_groups):
        rg, rows = _row_group_batch_rows(path, meta, g)
        try:
            check_pages(source.fileno(), rg, checked)
        except PageError as exc:
            raise ArchiveError(path, f"row group {g}: {exc}") from None
        except OSError as exc:
            raise _unreadable(path, exc) from None
        batches = pf.iter_batches(batch_size=rows, row_groups=[g], columns=wanted)
        while True:
            try:
                batch = next(batches, None)
            except FileNotFoundError:
                raise
            except _DECODE_ERRORS as exc:
                raise _unreadable(path, exc) from None
            if batch is None:
                break
            yield _expanded(path, batch, columns)


def _check_footer_size(path: Path, source: Any) -> None:
    """Refuse a footer over its cap from the length in the file's last 8 bytes, before parsing."""
    try:
        size = os.fstat(source.fileno()).st_size
        if size < 12:
            raise ArchiveError(path, "not a readable Parquet file (corrupt or truncated)")
        source.seek(size - 8)
        tail = source.read(8)
        source.seek(0)
    except OSError as exc:
        raise _unreadable(path, exc) from None
    footer = int.from_bytes(tail[:4], "little")
    if footer + 12 > size:  # longer than the file: let the parser name it corrupt
        return
    if tail[4:] == b"PAR1" and footer > MAX_ARCHIVE_FOOTER_BYTES:
        raise ArchiveError(
            path, f"footer of {footer} bytes, over its cap of {size_text(MAX_ARCHIVE_FOOTER_BYTES)}"
        )


def _row_group_batch_rows(
    path: Path, meta: pq.FileMetaData, g: int
) -> tuple[pq.RowGroupMetaData, int]:
    """Row group ``g``'s metadata and rows per batch, its declared sizes checked first."""
    try:
        rg = meta.row_group(g)
        rows, total = rg.num_rows, rg.total_byte_size
        chunks = [rg.column(c) for c in range(rg.num_columns)]
        sizes = [(c.path_in_schema, c.total_uncompressed_size, c.num_values) for c in chunks]
    except _DECODE_ERRORS as exc:
        raise _unreadable(path, exc) from None
    where = f"row group {g}"
    if rows < 0 or total < 0:
        raise ArchiveError(path, f"{where} declares a negative size")
    most_buckets = 0
    for name, size, values in sizes:
        if size < 0:
            raise ArchiveError(path, f"{where}: {name} declares a negative size")
        if name.split(".")[0] not in BUCKET_COLUMNS:
            if values != rows:  # one value a row (null or not), as the pages must agree
                raise ArchiveError(path, f"{where}: {name} declares {values} values in {rows} rows")
            continue
        if values > max(rows, 1) * MAX_ARCHIVE_ROW_BUCKETS:
            raise ArchiveError(
                path,
                f"{where}: {name} declares {values} buckets in {rows} rows, over "
                f"{MAX_ARCHIVE_ROW_BUCKETS} a row",
            )
        most_buckets = max(most_buckets, values)
    if most_buckets <= ARCHIVE_BATCH_VALUES:  # any batch of it holds at most that: read it whole
        return rg, max(1, min(rows, ARCHIVE_BATCH_ROWS))
    return rg, max(1, ARCHIVE_BATCH_VALUES // MAX_ARCHIVE_ROW_BUCKETS)  # a row may hold them all


def _expanded(path: Path, batch: pa.RecordBatch, columns: list[str]) -> pa.RecordBatch:
    """``batch`` with its dictionaries checked and expanded, in FILE_SCHEMA's types."""
    arrays = []
    for name in columns:
        if name not in batch.schema.names:  # broker, in files written before broker rollups
            arrays.append(pa.array([""] * batch.num_rows, pa.string()))
            continue
        col = batch.column(name)
        if pa.types.is_dictionary(col.type):
            lengths = pc.binary_length(col.dictionary)
            if name in LABEL_COLUMNS:
                longest = pc.max(lengths).as_py() or 0
                if longest > _MAX_LABEL_BYTES:
                    raise ArchiveError(
                        path, f"a {name} label of {longest} bytes, over {_MAX_LABEL_BYTES}"
                    )
            else:
                used = pc.sum(pc.take(lengths, col.indices)).as_py() or 0
                if used > MAX_ARCHIVE_EXPANDED_BYTES:
                    cap = size_text(MAX_ARCHIVE_EXPANDED_BYTES)
                    raise ArchiveError(path, f"{name} expands to {used} bytes, over {cap}")
            col = col.dictionary_decode()
        arrays.append(col)
    return pa.RecordBatch.from_arrays(arrays, names=columns)


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
    if len(index) > layout.overflow_index + 1:
        return (
            f"bucket_index has {len(index)} entries, over the layout's {layout.overflow_index + 1}"
        )
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
    """A file's windows, every row checked first: a bad row makes the whole file bad.

    Read batch by batch (``iter_batches``): beyond the windows returned, a file costs one batch.
    """
    out: list[WindowHistogram] = []
    for batch in iter_batches(path):
        out += batch_windows(path, batch, len(out), resolution, span_us, part_us, layouts)
    return out


def batch_windows(
    path: Path,
    batch: pa.RecordBatch,
    first_row: int,
    resolution: str,
    span_us: int | None,
    part_us: tuple[int, int] | None,
    layouts: dict[tuple[int, int, int], HdrLayout],
) -> list[WindowHistogram]:
    """The windows of one batch of ``path`` (its rows numbered from ``first_row``), each checked."""
    try:
        scalars = {
            c: batch.column(c).to_pylist()
            for c in batch.schema.names
            if c not in (*BUCKET_COLUMNS, "hdr")
        }
        buckets = {c: _list_rows(batch.column(c)) for c in BUCKET_COLUMNS}
    except _DECODE_ERRORS as exc:
        raise _unreadable(path, exc) from None
    out = []
    for j in range(batch.num_rows):
        i = first_row + j
        r = {c: v[j] for c, v in scalars.items()}
        for c, (offsets, values, valid, holey) in buckets.items():
            if j in holey:
                raise ArchiveError(path, f"row {i}: {c} holds a null")
            r[c] = values[offsets[j] : offsets[j + 1]] if valid[j] else None
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
            layout, r["bucket_index"].copy(), r["bucket_count"].copy(), r["max_us"], r["sum_us"]
        )  # copies: a window must not keep its whole batch alive
        series = SeriesKey(r["cluster"], r["topic"], r["partition"], r["kind"], r["broker"] or "")
        out.append(
            WindowHistogram(
                resolution, r["window_start_us"], r["window_end_us"], series, hist, r["lost"]
            )
        )
    return out


def _list_rows(col: pa.Array) -> tuple[Any, Any, Any, set[int]]:
    """(offsets, values, valid, rows holding a null) of a list column, without a Python object
    per value: row j is ``values[offsets[j]:offsets[j + 1]]``."""
    offsets = col.offsets.to_numpy()
    inner = col.values
    holey: set[int] = set()
    if inner.null_count:
        rows = pc.list_parent_indices(col).to_numpy()
        nulls = (
            inner.slice(offsets[0], offsets[-1] - offsets[0])
            .is_null()
            .to_numpy(zero_copy_only=False)
        )
        holey = {int(x) for x in np.unique(rows[nulls])}
        inner = inner.fill_null(0)
    values = inner.to_numpy()
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    return offsets, values, valid, holey


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
    """Archived windows overlapping [start_us, end_us), optionally of one resolution, sorted.

    Files are chosen by path (resolution, date, hour) and name before any is opened. A bad file
    raises ArchiveError, or with ``skip_bad`` is left out whole and listed in ``bad``. Per-broker
    rollups only with ``brokers``: they hold the same samples as the partitions.
    """
    found = ArchiveRead()
    bad = found.bad if skip_bad else None
    found.windows = sorted(
        iter_windows(archive_dir, resolution, start_us, end_us, brokers, bad),
        key=lambda w: w.sort_key,
    )
    return found


def iter_windows(
    archive_dir: str | Path,
    resolution: str | None = None,
    start_us: int | None = None,
    end_us: int | None = None,
    brokers: bool = False,
    bad: list[ArchiveError] | None = None,
) -> Iterator[WindowHistogram]:
    """``scan_windows``' windows one partition directory (an hour) at a time, in path order:
    a caller that merges as it goes (``nines slo``) holds an hour, not the span.

    A directory's windows come once all its files are read and checked (a compaction racing the
    read plans it again). A bad file raises ArchiveError, or, given ``bad``, is appended there.
    """
    root = Path(archive_dir)
    if not root.is_dir():
        return
    layouts: dict[tuple[int, int, int], HdrLayout] = {}
    for res_dir in sorted(root.glob("resolution=*")):
        res = key_value(res_dir.name, "resolution") or ""
        if (resolution is not None and res != resolution) or not res_dir.is_dir():
            continue
        span_us = resolution_span_us(res)
        if span_us is None:
            err = ArchiveError(res_dir, "not a resolution (resolution=10s, 1m, 1h, ...)")
            if bad is None:
                raise err
            bad.append(err)
            continue
        for directory, part_us in _candidate_dirs(res_dir, span_us, start_us, end_us):
            for w in _read_dir(directory, res, span_us, part_us, layouts, bad):
                if start_us is not None and w.window_end_us <= start_us:
                    continue
                if end_us is not None and w.window_start_us >= end_us:
                    continue
                if w.series.broker and not brokers:
                    continue
                yield w


def _read_dir(
    directory: Path,
    resolution: str,
    span_us: int,
    part_us: tuple[int, int] | None,
    layouts: dict[tuple[int, int, int], HdrLayout],
    found_bad: list[ArchiveError] | None,
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
            if found_bad is None:
                raise err from None
            found_bad.append(err)
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
                    if found_bad is None:
                        raise
                    bad.append(exc)
        except FileNotFoundError:
            continue  # a compaction replaced the file: plan the directory again
        if found_bad is not None:
            found_bad.extend(bad)
        return out
    raise ArchiveError(directory, "changed under every one of 5 reads")


def export_hlog(windows: Sequence[WindowHistogram], path: str | Path) -> Path:
    """An HdrHistogram interval log (.hlog) with one interval per window, in time order."""
    if not windows:
        raise ValueError("no windows to export")
    return write_hlog(
        (HlogInterval(w.window_start_us, w.window_end_us, w.hist) for w in windows), path
    )
