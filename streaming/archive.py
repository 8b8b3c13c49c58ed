"""The histogram archive: every closed window as Parquet rows, and HdrHistogram ``.hlog`` export.

Rows are written per Spark batch id and rewritten identically when Spark replays a batch, so the
archive is exactly once. Per-topic rollups are not stored: readers merge partitions themselves.
Per-broker rollups are (a ``broker`` column; the partition rows do not say which leader each
sample had), and ``read_windows`` returns them only when asked, so merging everything it returns
by default still counts each sample once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from core.hdr import HdrLayout, SparseHistogram
from core.hdr_codec import encode
from core.hlog import HlogInterval, write_hlog
from core.windows import ALL_PARTITIONS, SeriesKey, WindowHistogram

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


def _date(us: int) -> str:
    return datetime.fromtimestamp(us / 1e6, tz=UTC).strftime("%Y-%m-%d")


def write_windows(
    archive_dir: str | Path, batch_id: int, windows: Iterable[WindowHistogram]
) -> list[Path]:
    """Write one batch's closed windows; the same batch id overwrites its files identically."""
    groups: dict[tuple[str, str], list[WindowHistogram]] = {}
    for w in windows:
        topic_rollup = w.series.partition == ALL_PARTITIONS and not w.series.broker
        if topic_rollup and w.series.kind != "hiccup":
            continue
        groups.setdefault((w.resolution, _date(w.window_start_us)), []).append(w)
    written = []
    for (resolution, date), group in sorted(groups.items()):
        group.sort(key=lambda w: w.sort_key)
        table = pa.Table.from_pylist([_row(w) for w in group], schema=SCHEMA)
        directory = Path(archive_dir) / f"resolution={resolution}" / f"date={date}"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"batch-{batch_id:09d}.parquet"
        tmp = path.with_suffix(".parquet.tmp")
        pq.write_table(table.drop_columns(["resolution"]), tmp)
        os.replace(tmp, path)
        written.append(path)
    return written


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


def read_windows(
    archive_dir: str | Path,
    resolution: str | None = None,
    start_us: int | None = None,
    end_us: int | None = None,
    brokers: bool = False,
) -> list[WindowHistogram]:
    """Archived windows overlapping [start_us, end_us), optionally of one resolution.

    Per-broker rollups only with ``brokers``: they hold the same samples as the partitions.
    """
    root = Path(archive_dir)
    if not root.exists():
        return []
    pattern = f"resolution={resolution}/date=*/batch-*.parquet" if resolution else "*/*/*.parquet"
    layouts: dict[tuple[int, int, int], HdrLayout] = {}
    out = []
    for path in sorted(root.glob(pattern)):
        res = path.parent.parent.name.split("=", 1)[1]
        for r in pq.read_table(path).to_pylist():
            if start_us is not None and r["window_end_us"] <= start_us:
                continue
            if end_us is not None and r["window_start_us"] >= end_us:
                continue
            broker = r.get("broker") or ""  # files written before brokers have no column
            if broker and not brokers:
                continue
            key = (r["lowest_us"], r["highest_us"], r["digits"])
            layout = layouts.setdefault(key, HdrLayout(*key))
            hist = SparseHistogram.from_counts(
                layout, r["bucket_index"], r["bucket_count"], r["max_us"], r["sum_us"]
            )
            series = SeriesKey(r["cluster"], r["topic"], r["partition"], r["kind"], broker)
            out.append(
                WindowHistogram(
                    res, r["window_start_us"], r["window_end_us"], series, hist, r["lost"]
                )
            )
    out.sort(key=lambda w: w.sort_key)
    return out


def export_hlog(windows: Sequence[WindowHistogram], path: str | Path) -> Path:
    """An HdrHistogram interval log (.hlog) with one interval per window, in time order."""
    if not windows:
        raise ValueError("no windows to export")
    return write_hlog(
        (HlogInterval(w.window_start_us, w.window_end_us, w.hist) for w in windows), path
    )
