"""The histogram archive's writer: every closed window as Parquet rows, compacted, pruned.

Rows go where ``streaming.archive_files`` says, per Spark batch id, and are rewritten identically
when Spark replays a batch, so the archive is exactly once. Once an hour is closed (a window of
its resolution ending a span past the hour has been written) its batch files are compacted into
one file named after the batch ids it covers, written atomically before the inputs are removed;
readers (``streaming.archive_read``) never read a batch file a compacted file covers, so a crash
in between (or a replay that rewrites a compacted batch) is read once. Whole dates past the
retention are removed. Per-topic rollups are not stored; per-broker rollups are (a ``broker``
column; the partition rows do not say which leader each sample had).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from core.hdr import HdrLayout
from core.hdr_codec import encode
from core.units import parse_duration_s
from core.windows import ALL_PARTITIONS, WindowHistogram
from runtime.files import ARCHIVE_BATCH_ROWS, ARCHIVE_BATCH_VALUES
from streaming.archive_files import (
    BATCH_FILE,
    BUCKET_COLUMNS,
    COMPACT_FILE,
    DAY_US,
    FILE_SCHEMA,
    HOUR_US,
    LABEL_COLUMNS,
    SCHEMA,
    ArchiveError,
    date_name,
    date_start_us,
    dir_start_us,
    hour_dir,
    key_value,
    select_files,
)
from streaming.archive_read import batch_windows, iter_batches, resolution_span_us

log = logging.getLogger("nines.archive")


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
        _write_atomically(table.drop_columns(["resolution"]).to_batches(), path)
        written.append(path)
    return written


#: Sorted bucket indexes delta-encode to a few bits each, and zstd beats the default snappy:
#: a 10s batch of 46 rows (~830 buckets each) takes 87 kB instead of 133 kB (bench.archive_disk).
#: No statistics of the histogram columns: nothing filters on them, and the min and max of each
#: row group's ``hdr`` would double the footer (``MAX_ARCHIVE_FOOTER_BYTES``).
WRITE_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "use_dictionary": list(LABEL_COLUMNS),
    "column_encoding": dict.fromkeys(BUCKET_COLUMNS, "DELTA_BINARY_PACKED"),
    "write_statistics": [n for n in FILE_SCHEMA.names if n not in (*BUCKET_COLUMNS, "hdr")],
}


def _write_atomically(batches: Iterable[pa.RecordBatch], path: Path) -> None:
    """Write ``batches`` (FILE_SCHEMA) to ``path`` via a ``.tmp`` renamed into place, in row
    groups the reader reads whole (``_row_groups``); on any failure no ``.tmp`` is left."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with pq.ParquetWriter(tmp, FILE_SCHEMA, **WRITE_OPTIONS) as writer:
            for table in _row_groups(batches):
                writer.write_table(table, row_group_size=max(1, table.num_rows))
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())  # the rename must never publish a file the disk does not hold
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _row_groups(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.Table]:
    """``batches`` regrouped into tables of at most ``ARCHIVE_BATCH_ROWS`` rows and
    ``ARCHIVE_BATCH_VALUES`` buckets (a row holds at most ``MAX_ARCHIVE_ROW_BUCKETS``), each
    written as one row group: what the reader decodes at once, so it reads each one whole."""
    pending: list[pa.RecordBatch] = []
    rows = values = 0
    for batch in batches:
        offsets = batch.column("bucket_index").offsets.to_numpy()
        sizes = np.diff(offsets)
        start = 0
        while start < batch.num_rows:
            # the most rows from ``start`` that fit what is pending
            room = np.cumsum(sizes[start:]) <= ARCHIVE_BATCH_VALUES - values
            take = min(int(np.argmin(room)) if not room.all() else room.size,
                       ARCHIVE_BATCH_ROWS - rows)  # fmt: skip
            if take == 0:
                if not pending:  # a single row over the budget: the reader bounds it
                    take = 1
                else:
                    yield pa.Table.from_batches(pending)
                    pending, rows, values = [], 0, 0
                    continue
            pending.append(batch.slice(start, take))
            rows += take
            values += int(sizes[start : start + take].sum())
            start += take
    if pending:
        yield pa.Table.from_batches(pending)


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
    return bool(BATCH_FILE.fullmatch(base) or COMPACT_FILE.fullmatch(base))


def compact_dir(directory: str | Path) -> Path | None:
    """Merge a closed hour's files into one ``compact-FIRST-LAST.parquet``; None: nothing to do.

    The merged file is written and renamed into place before any input is removed, so a crash
    leaves either the inputs, or the merged file plus inputs it covers (read once, removed by
    the next compaction). Raises ArchiveError, touching nothing, if an input is bad. Inputs
    stream through batch by batch (``_checked_batches``), in name order (each batch file is
    sorted, the reader sorts), so compacting costs one row group and one batch of memory.
    """
    directory = Path(directory)
    names = sorted(p.name for p in directory.iterdir())
    chosen = select_files(names)
    leftovers = [n for n in names if _ours(n) and n.endswith(".parquet") and n not in chosen]
    if len(chosen) <= 1 and not leftovers and all(COMPACT_FILE.fullmatch(n) for n in chosen):
        for stale in names:
            if _ours(stale) and stale.endswith(".tmp"):
                (directory / stale).unlink(missing_ok=True)
        return None
    ids: list[int] = []
    for name in chosen:
        if m := COMPACT_FILE.fullmatch(name):
            ids += [int(m[1]), int(m[2])]
        elif m := BATCH_FILE.fullmatch(name):
            ids.append(int(m[1]))
    if not ids:
        return None
    res = key_value(directory.parent.parent.name, "resolution") or ""
    out = directory / f"compact-{min(ids):09d}-{max(ids):09d}.parquet"
    _write_atomically(_checked_batches(directory, chosen, res), out)
    for name in names:  # ours only: a file of another name is not the archive's to remove
        if name != out.name and _ours(name):
            (directory / name).unlink(missing_ok=True)
    return out


def _checked_batches(
    directory: Path, names: list[str], resolution: str
) -> Iterator[pa.RecordBatch]:
    """Every row of the files ``names``, in order, batch by batch, each batch's rows checked as
    the reader checks them (a bad row raises ArchiveError before its batch is yielded)."""
    span_us = resolution_span_us(resolution)
    layouts: dict[tuple[int, int, int], HdrLayout] = {}
    for name in names:
        path, first = directory / name, 0
        for batch in iter_batches(path, FILE_SCHEMA.names):
            batch_windows(path, batch, first, resolution, span_us, None, layouts)
            first += batch.num_rows
            yield batch


def prune(
    archive_dir: str | Path, now_us: int, retention_s: float, max_bytes: int | None = None
) -> list[Path]:
    """Remove whole date partitions that ended more than ``retention_s`` before ``now_us``;
    then, while the archive holds more than ``max_bytes``, its oldest date (every resolution,
    so what is left covers the same days at each; today's is never removed)."""
    cutoff = now_us - int(retention_s * 1e6)
    today = date_name(now_us)
    dates: dict[str, list[Path]] = {}
    for date_dir in Path(archive_dir).glob("resolution=*/date=*"):
        name = key_value(date_dir.name, "date") or ""
        if date_dir.is_dir() and date_start_us(name) is not None:
            dates.setdefault(name, []).append(date_dir)
    removed = []
    sizes = (
        {} if max_bytes is None else {d: sum(map(_tree_bytes, dirs)) for d, dirs in dates.items()}
    )
    total = sum(sizes.values())
    for name in sorted(dates):
        start = date_start_us(name) or 0
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
            start = dir_start_us(d)
            if start is None or start + HOUR_US > closed_before or not d.is_dir():
                continue
            try:
                compact_dir(d)
            except (ArchiveError, OSError, pa.ArrowException) as exc:
                log.warning("archive: not compacting %s: %s", d, exc)
        self._closed_upto[resolution] = closed_before
