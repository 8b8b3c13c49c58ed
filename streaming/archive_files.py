"""The archive's files: their schema, and where a window's row goes (Hive-style paths).

Layout (so a path says what a file holds before it is opened)::

    DIR/resolution=10s/date=2026-11-22/hour=14/batch-000000123.parquet     one micro-batch
    DIR/resolution=10s/date=2026-11-22/hour=13/compact-000000100-000000819.parquet

A compacted file covers the batch ids in its name; ``select_files`` says which files of a
directory hold each row once. The writer (``streaming.archive``) and the reader
(``streaming.archive_read``) both follow this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

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
#: The label columns: few distinct values, written and read as dictionaries.
LABEL_COLUMNS = ("cluster", "topic", "partition", "kind", "broker")
#: A row's histogram: one list per row, as long as its layout's occupied buckets.
BUCKET_COLUMNS = ("bucket_index", "bucket_count")

HOUR_US = 3_600_000_000
DAY_US = 24 * HOUR_US
BATCH_FILE = re.compile(r"batch-(\d+)\.parquet")
COMPACT_FILE = re.compile(r"compact-(\d+)-(\d+)\.parquet")


class ArchiveError(ValueError):
    """An archive file (or directory) that cannot be used as it is; one line naming it."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = Path(path), reason


def date_name(us: int) -> str:
    """The ``date=`` partition of a time (UTC)."""
    return datetime.fromtimestamp(us / 1e6, tz=UTC).strftime("%Y-%m-%d")


def hour_name(us: int) -> str:
    """The ``hour=`` partition of a time (UTC)."""
    return f"{datetime.fromtimestamp(us / 1e6, tz=UTC).hour:02d}"


def key_value(name: str, key: str) -> str | None:
    """``VALUE`` of a ``KEY=VALUE`` directory name; None for another key."""
    prefix = f"{key}="
    return name[len(prefix) :] if name.startswith(prefix) else None


def date_start_us(name: str) -> int | None:
    """When a ``date=`` partition starts; None for a name that is not a date."""
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
        / f"date={date_name(window_start_us)}"
        / f"hour={hour_name(window_start_us)}"
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
        if m := COMPACT_FILE.fullmatch(name):
            compacts.append((int(m[1]), int(m[2]), name))
        elif m := BATCH_FILE.fullmatch(name):
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


def dir_start_us(hour_path: Path) -> int | None:
    """When an ``hour=`` partition starts; None for a path that is not one."""
    day = date_start_us(key_value(hour_path.parent.name, "date") or "")
    hour = key_value(hour_path.name, "hour")
    if day is None or hour is None or not hour.isdigit() or not 0 <= int(hour) < 24:
        return None
    return day + int(hour) * HOUR_US
