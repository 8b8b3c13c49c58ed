"""The histogram archive: every closed window as Parquet rows, and HdrHistogram ``.hlog`` export.

Layout (Hive-style, so a path says what a file holds before it is opened)::

    DIR/resolution=10s/date=2026-11-22/hour=14/batch-000000123.parquet     one micro-batch
    DIR/resolution=10s/date=2026-11-22/hour=13/compact-000000100-000000819.parquet

Rows are written per Spark batch id and rewritten identically when Spark replays a batch, so the
archive is exactly once. Once an hour is closed (a window of its resolution ending a span past
the hour has been written) its batch files are compacted into one file named after the batch ids
it covers, written atomically before the inputs are removed; readers never read a batch file a
compacted file covers, so a crash in between (or a replay that rewrites a compacted batch) is
read once. Whole dates past the retention are removed. Per-topic rollups are not stored:
readers merge partitions themselves. Per-broker rollups are (a ``broker`` column; the partition
rows do not say which leader each sample had), and the readers return them only when asked, so
merging everything they return by default still counts each sample once.

A file that cannot be read, has the wrong schema, or holds an inconsistent histogram is an
:class:`ArchiveError` naming the file; ``scan_windows`` can collect those instead of raising.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from core.hdr import HdrLayout, LayoutError, SparseHistogram
from core.hdr_codec import encode
from core.hlog import HlogInterval, write_hlog
from core.units import parse_duration_s
from core.windows import ALL_PARTITIONS, SeriesKey, WindowHistogram
from runtime.files import MAX_ARCHIVE_FILE_BYTES, open_regular

log = logging.getLogger("nines.archive")

SCHEMA = pa.schema(
    [
        ("resolution", pa.string()),
        ("window_start_us", pa.int64()),
        ("window_end_us", pa.int64()),
        ("cluster", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.string()),
        ("kind", pa.string()),
        ("broker", pa.string()),
        ("samples", pa.int64()),
        ("lost", pa.int64()),
        ("max_us", pa.int64()),
        ("sum_us", pa.int64()),
        ("overflow", pa.int64()),
        ("lowest_us", pa.int64()),
        ("highest_us", pa.int64()),
        ("digits", pa.int32()),
        ("bucket_index", pa.list_(pa.int64())),
        ("bucket_count", pa.list_(pa.int64())),
        ("hdr", pa.binary()),
    ]
)
#: What a file holds (``resolution`` is its path); ``broker`` is absent in files written before
#: broker rollups, ``hdr`` is for export only and never read back.
FILE_SCHEMA = SCHEMA.remove(SCHEMA.get_field_index("resolution"))
OPTIONAL_COLUMNS = frozenset({"broker"})
READ_COLUMNS = [f.name for f in FILE_SCHEMA if f.name != "hdr"]

HOUR_US = 3_600_000_000
DAY_US = 24 * HOUR_US
_BATCH = re.compile(r"batch-(\d+)\.parquet")
_COMPACT = re.compile(r"compact-(\d+)-(\d+)\.parquet")


class ArchiveError(ValueError):
    """An archive file (or directory) that cannot be used as it is; one line naming it."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = Path(path), reason


@dataclass
class ArchiveRead:
    """What a scan found: the windows, and the files it left out (``skip_bad``) with why."""

    windows: list[WindowHistogram] = field(default_factory=list)
    bad: list[ArchiveError] = field(default_factory=list)


# ---------------------------------------------------------------------------- paths


def _date(us: int) -> str:
    return datetime.fromtimestamp(us / 1e6, tz=UTC).strftime("%Y-%m-%d")


def _hour(us: int) -> str:
    return f"{datetime.fromtimestamp(us / 1e6, tz=UTC).hour:02d}"


def _value(name: str, key: str) -> str | None:
    prefix = f"{key}="
    return name[len(prefix) :] if name.startswith(prefix) else None


def _date_start_us(name: str) -> int | None:
    try:
        day = datetime.strptime(name, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        return None
    return int(day.timestamp()) * 1_000_000


def hour_dir(archive_dir: str | Path, resolution: str, window_start_us: int) -> Path:
    """The directory that holds a window's row: by resolution, date and hour of its start."""
    return (
        Path(archive_dir)
        / f"resolution={resolution}"
        / f"date={_date(window_start_us)}"
        / f"hour={_hour(window_start_us)}"
    )


def select_files(names: Iterable[str]) -> list[str]:
    """Which Parquet files of one directory to read, from their names alone.

    A compacted file covers the batch ids in its name: batch files inside a kept compacted
    file's range and compacted files inside a wider one are left out (they are a compaction's
    inputs that a crash left behind, or a replayed batch that was already compacted).
    """
    compacts: list[tuple[int, int, str]] = []
    batches: list[tuple[int, str]] = []
    for name in names:
        if m := _COMPACT.fullmatch(name):
            compacts.append((int(m[1]), int(m[2]), name))
        elif m := _BATCH.fullmatch(name):
            batches.append((int(m[1]), name))
    kept: list[tuple[int, int, str]] = []
    for first, last, name in sorted(compacts, key=lambda c: (c[0] - c[1], c[0])):
        if any(a <= first and last <= b for a, b, _ in kept):
            continue
        for a, b, other in kept:
            if first <= b and a <= last:
                raise ArchiveError(name, f"overlaps {other} (a compacted file edited by hand?)")
        kept.append((first, last, name))
    out = [name for _, _, name in sorted(kept)]
    out += [name for n, name in sorted(batches) if not any(a <= n <= b for a, b, _ in kept)]
    return out


# ---------------------------------------------------------------------------- writing


def write_windows(
    archive_dir: str | Path, batch_id: int, windows: Iterable[WindowHistogram]
) -> list[Path]:
    """Write one batch's closed windows; the same batch id overwrites its files identically."""
    groups: dict[Path, list[WindowHistogram]] = {}
    for w in windows:
        topic_rollup = w.series.partition == ALL_PARTITIONS and not w.series.broker
        if topic_rollup and w.series.kind != "hiccup":
            continue
        groups.setdefault(hour_dir(archive_dir, w.resolution, w.window_start_us), []).append(w)
    written = []
    for directory, group in sorted(groups.items()):
        group.sort(key=lambda w: w.sort_key)
        table = pa.Table.from_pylist([_row(w) for w in group], schema=SCHEMA)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"batch-{batch_id:09d}.parquet"
        _write_atomically(table.drop_columns(["resolution"]), path)
        written.append(path)
    return written


#: Sorted bucket indexes delta-encode to a few bits each, and zstd beats the default snappy:
#: a 10s batch of 46 rows (~830 buckets each) takes 87 kB instead of 133 kB (bench.archive_disk).
WRITE_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "use_dictionary": ["cluster", "topic", "partition", "kind", "broker"],
    "column_encoding": {
        "bucket_index": "DELTA_BINARY_PACKED",
        "bucket_count": "DELTA_BINARY_PACKED",
    },
}


def _write_atomically(table: pa.Table, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp, **WRITE_OPTIONS)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())  # the rename must never publish a file the disk does not hold
    os.replace(tmp, path)


def _row(w: WindowHistogram) -> dict[str, object]:
    h, layout = w.hist, w.hist.layout
    return {
        "resolution": w.resolution,
        "window_start_us": w.window_start_us,
        "window_end_us": w.window_end_us,
        "cluster": w.series.cluster,
        "topic": w.series.topic,
        "partition": w.series.partition,
        "kind": w.series.kind,
        "broker": w.series.broker,
        "samples": h.total,
        "lost": w.lost,
        "max_us": h.max_us,
        "sum_us": h.sum_us,
        "overflow": h.overflow,
        "lowest_us": layout.lowest_us,
        "highest_us": layout.highest_us,
        "digits": layout.digits,
        "bucket_index": h.index.tolist(),
        "bucket_count": h.count.tolist(),
        "hdr": encode(h),
    }


def _ours(name: str) -> bool:
    """A batch or compacted file the archive wrote, or its temporary."""
    base = name.removesuffix(".tmp")
    return bool(_BATCH.fullmatch(base) or _COMPACT.fullmatch(base))


def compact_dir(directory: str | Path) -> Path | None:
    """Merge a closed hour's files into one ``compact-FIRST-LAST.parquet``; None: nothing to do.

    The merged file is written and renamed into place before any input is removed, so a crash
    leaves either the inputs, or the merged file plus inputs it covers (read once, removed by
    the next compaction). Raises ArchiveError, touching nothing, if an input is bad.
    """
    directory = Path(directory)
    names = sorted(p.name for p in directory.iterdir())
    chosen = select_files(names)
    leftovers = [n for n in names if _ours(n) and n.endswith(".parquet") and n not in chosen]
    if len(chosen) <= 1 and not leftovers and all(_COMPACT.fullmatch(n) for n in chosen):
        for stale in names:
            if _ours(stale) and stale.endswith(".tmp"):
                (directory / stale).unlink(missing_ok=True)
        return None
    ids: list[int] = []
    tables = []
    res = _value(directory.parent.parent.name, "resolution") or ""
    layouts: dict[tuple[int, int, int], HdrLayout] = {}
    for name in chosen:
        _rows(directory / name, res, _span_us(res), None, layouts)  # never merge a bad file
        tables.append(_read_table(directory / name, columns=None))
        if m := _COMPACT.fullmatch(name):
            ids += [int(m[1]), int(m[2])]
        elif m := _BATCH.fullmatch(name):
            ids.append(int(m[1]))
    if not ids:
        return None
    merged = pa.concat_tables([t.select(FILE_SCHEMA.names) for t in tables])
    merged = merged.sort_by(
        [(c, "ascending") for c in ("window_start_us", "cluster", "topic", "partition", "kind")]
        + [("broker", "ascending")]
    )
    out = directory / f"compact-{min(ids):09d}-{max(ids):09d}.parquet"
    _write_atomically(merged, out)
    for name in names:  # ours only: a file of another name is not the archive's to remove
        if name != out.name and _ours(name):
            (directory / name).unlink(missing_ok=True)
    return out


def prune(
    archive_dir: str | Path, now_us: int, retention_s: float, max_bytes: int | None = None
) -> list[Path]:
    """Remove whole date partitions that ended more than ``retention_s`` before ``now_us``;
    then, while the archive holds more than ``max_bytes``, its oldest date (every resolution,
    so what is left covers the same days at each; today's is never removed)."""
    cutoff = now_us - int(retention_s * 1e6)
    today = _date(now_us)
    dates: dict[str, list[Path]] = {}
    for date_dir in Path(archive_dir).glob("resolution=*/date=*"):
        name = _value(date_dir.name, "date") or ""
        if date_dir.is_dir() and _date_start_us(name) is not None:
            dates.setdefault(name, []).append(date_dir)
    removed = []
    sizes = (
        {} if max_bytes is None else {d: sum(map(_tree_bytes, dirs)) for d, dirs in dates.items()}
    )
    total = sum(sizes.values())
    for name in sorted(dates):
        start = _date_start_us(name) or 0
        over = max_bytes is not None and total > max_bytes and name != today
        if start + DAY_US <= cutoff or over:
            for date_dir in dates[name]:
                shutil.rmtree(date_dir, ignore_errors=True)
                removed.append(date_dir)
            total -= sizes.get(name, 0)
    return sorted(removed)


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class ArchiveWriter:
    """The stream job's archive: writes each batch, compacts closed hours, prunes old dates.

    Runs inside the foreachBatch sink, so nothing else writes while it compacts: every batch
    file of a closed hour exists, except a replay of the batch compacting (which ``select_files``
    reads once). Maintenance never fails a batch: a failure is logged and retried later.
    """

    #: How often (wall clock) dates past the retention are looked for.
    PRUNE_EVERY_S = 3600.0

    def __init__(
        self,
        archive_dir: str | Path,
        retention_s: float,
        compact: bool = True,
        max_bytes: int | None = None,
    ) -> None:
        self.root = Path(archive_dir)
        self.retention_s = retention_s
        self.compact = compact
        self.max_bytes = max_bytes
        self._closed_upto: dict[str, int] = {}  # resolution → hours before this are compacted
        self._pruned_at_s: float | None = None

    def write(
        self, batch_id: int, windows: Sequence[WindowHistogram], now_s: float | None = None
    ) -> list[Path]:
        """Write one batch, then compact the hours it closed and prune (see the class)."""
        written = write_windows(self.root, batch_id, windows)
        now = datetime.now(UTC).timestamp() if now_s is None else now_s
        if self.compact:
            newest: dict[str, int] = {}
            for w in windows:
                newest[w.resolution] = max(newest.get(w.resolution, 0), w.window_end_us)
            for resolution, end_us in sorted(newest.items()):
                self._compact_closed(resolution, end_us)
        if self._pruned_at_s is None or now - self._pruned_at_s >= self.PRUNE_EVERY_S:
            self._pruned_at_s = now
            try:
                for path in prune(self.root, int(now * 1e6), self.retention_s, self.max_bytes):
                    log.info("archive: removed %s (past the retention or the size cap)", path)
            except OSError as exc:
                log.warning("archive: pruning failed, will retry: %s", exc)
        return written

    def _compact_closed(self, resolution: str, newest_end_us: int) -> None:
        span_us = int(parse_duration_s(resolution) * 1e6)
        # windows starting in an hour end before the hour's end plus a span; once a window
        # ending after that was written, no later batch writes into the hour
        closed_before = (newest_end_us - span_us) // HOUR_US * HOUR_US
        done = self._closed_upto.get(resolution)
        if done is not None and closed_before <= done:
            return
        res_dir = self.root / f"resolution={resolution}"
        if done is None:  # first batch since start: every closed hour left uncompacted
            dirs = [d for d in res_dir.glob("date=*/hour=*") if d.is_dir()]
        else:
            dirs = [hour_dir(self.root, resolution, h) for h in range(done, closed_before, HOUR_US)]
        for d in sorted(dirs):
            start = _dir_start_us(d)
            if start is None or start + HOUR_US > closed_before or not d.is_dir():
                continue
            try:
                compact_dir(d)
            except (ArchiveError, OSError, pa.ArrowException) as exc:
                log.warning("archive: not compacting %s: %s", d, exc)
        self._closed_upto[resolution] = closed_before


def _dir_start_us(hour_path: Path) -> int | None:
    day = _date_start_us(_value(hour_path.parent.name, "date") or "")
    hour = _value(hour_path.name, "hour")
    if day is None or hour is None or not hour.isdigit() or not 0 <= int(hour) < 24:
        return None
    return day + int(hour) * HOUR_US


# ---------------------------------------------------------------------------- reading


#: What a damaged file can make pyarrow raise: its own errors, and a corrupt string or length
#: surfacing as a Python error (UnicodeDecodeError, found by flipping bytes) before it checks.
_DECODE_ERRORS = (OSError, pa.ArrowException, ValueError, IndexError, KeyError, OverflowError)


def _read_table(path: Path, columns: list[str] | None = READ_COLUMNS) -> pa.Table:
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


def _rows(
    path: Path,
    resolution: str,
    span_us: int | None,
    part_us: tuple[int, int] | None,
    layouts: dict[tuple[int, int, int], HdrLayout],
) -> list[WindowHistogram]:
    """A file's windows, every row checked first: a bad row makes the whole file bad."""
    table = _read_table(path)
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


def _span_us(resolution: str) -> int | None:
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
        day = _date_start_us(_value(date_dir.name, "date") or "")
        if not date_dir.is_dir() or day is None:
            continue
        if (lo is not None and day + DAY_US <= lo) or (end_us is not None and day >= end_us):
            continue
        yield date_dir, (day, day + DAY_US)  # files written before hour partitions
        for h in sorted(date_dir.glob("hour=*")):
            hstart = _dir_start_us(h)
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
        res = _value(res_dir.name, "resolution") or ""
        if (resolution is not None and res != resolution) or not res_dir.is_dir():
            continue
        span_us = _span_us(res)
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
                    out.extend(_rows(directory / name, resolution, span_us, part_us, layouts))
                except ArchiveError as exc:
                    if not skip_bad:
                        raise
                    bad.append(exc)
        except FileNotFoundError:
            continue  # a compaction replaced the file: plan the directory again
        found.bad.extend(bad)
        return out
    raise ArchiveError(directory, "changed under every one of 5 reads")


def read_windows(
    archive_dir: str | Path,
    resolution: str | None = None,
    start_us: int | None = None,
    end_us: int | None = None,
    brokers: bool = False,
) -> list[WindowHistogram]:
    """Archived windows overlapping [start_us, end_us); ArchiveError on the first bad file."""
    return scan_windows(archive_dir, resolution, start_us, end_us, brokers).windows


def export_hlog(windows: Sequence[WindowHistogram], path: str | Path) -> Path:
    """An HdrHistogram interval log (.hlog) with one interval per window, in time order."""
    if not windows:
        raise ValueError("no windows to export")
    return write_hlog(
        (HlogInterval(w.window_start_us, w.window_end_us, w.hist) for w in windows), path
    )
