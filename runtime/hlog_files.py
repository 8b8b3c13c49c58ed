"""``.hlog`` files: HdrHistogram interval logs written to and read from disk.

The log's text is :mod:`core.hlog`'s (pure); this module opens the files: a log is written a line
at a time (a long span is many windows) and read back with ``hdrh.log``'s reader.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from core.hdr import HdrLayout
from core.hlog import HlogInterval, hlog_lines, interval_of


def write_hlog(intervals: Iterable[HlogInterval], path: str | Path) -> Path:
    """Write an interval log, one line per interval in time order (``core.hlog.hlog_lines``)."""
    lines = hlog_lines(intervals)
    first = next(lines)  # no intervals: ValueError before the file is made
    out = Path(path)
    with out.open("w", encoding="utf-8") as f:
        f.write(first)
        f.writelines(lines)
    return out


def read_hlog(path: str | Path) -> list[HlogInterval]:
    """The intervals of an ``.hlog`` on the wall clock (StartTime/BaseTime applied), each in the
    layout it was encoded with."""
    reader = HistogramLogReader(str(path), HdrHistogram(1, 2, 1))
    layouts: dict[tuple[int, int, int], HdrLayout] = {}
    out = []
    try:
        while (h := reader.get_next_interval_histogram()) is not None:
            out.append(interval_of(h, layouts))
    finally:
        reader.close()
    return out
