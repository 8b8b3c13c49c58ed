"""HdrHistogram interval logs (``.hlog``) as text: the lines ``hdrh.log``'s writer writes, pure.

One interval per closed window, in time order, as HdrHistogram's tools (HistogramLogProcessor,
HistogramLogAnalyzer, ``hdrh``) expect. The encoding itself lives in :mod:`core.hdr_codec`; the
files (written line by line, read with ``hdrh``'s reader) are :mod:`runtime.hlog_files`'.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogWriter

from core.hdr import HdrLayout, SparseHistogram
from core.hdr_codec import from_hdrh, to_hdrh

#: Interval_Max is logged in milliseconds, HdrHistogram's convention; our histograms hold µs.
MAX_VALUE_UNIT_RATIO = 1000.0


@dataclass(frozen=True)
class HlogInterval:
    """One interval of an ``.hlog``: its span on the wall clock and its histogram."""

    start_us: int
    end_us: int
    hist: SparseHistogram


class _Lines:
    """What ``HistogramLogWriter`` writes to: the lines, kept until taken."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, text: str) -> None:
        self.lines.append(text)

    def take(self) -> list[str]:
        out, self.lines = self.lines, []
        return out


class _LogWriter(HistogramLogWriter):
    """``hdrh``'s writer with the two lines hdrh 0.10 gets wrong written as Java's writer does.

    On hdrh 0.10, ``output_start_time`` raises AttributeError (``iso_format``) and reads its msec
    argument as seconds; ``output_interval_histogram`` floors Interval_Max to whole units (a 0.9
    ms max is logged as 0.000000). Java writes ``%.3f`` of the exact ratio.
    """

    def output_start_time(self, start_time_msec: float) -> None:
        start = datetime.fromtimestamp(start_time_msec / 1000.0, tz=UTC)
        self.output_comment(
            f"[StartTime: {start_time_msec / 1000.0:.3f} (seconds since epoch), "
            f"{start.isoformat()}]"
        )

    def output_interval_histogram(
        self,
        histogram: HdrHistogram,
        start_time_stamp_sec: float = 0,
        end_time_stamp_sec: float = 0,
        max_value_unit_ratio: float = 1000000.0,
    ) -> None:
        self.log.write(
            f"{start_time_stamp_sec:.3f},{end_time_stamp_sec - start_time_stamp_sec:.3f},"
            f"{histogram.get_max_value() / max_value_unit_ratio:.3f},"
            f"{histogram.encode().decode()}\n"
        )


def hlog_lines(intervals: Iterable[HlogInterval]) -> Iterator[str]:
    """An interval log's text, one interval at a time in time order, times relative to the first.

    Interval_Max is the top bucket's highest equivalent value in ms, as every HdrHistogram writer
    logs it; the archive keeps the exact max.
    """
    ordered = sorted(intervals, key=lambda i: i.start_us)
    if not ordered:
        raise ValueError("no intervals to write")
    base_us = ordered[0].start_us
    out = _Lines()
    writer = _LogWriter(out)
    writer.output_log_format_version()
    writer.output_start_time(base_us / 1000.0)
    writer.output_base_time(base_us / 1000.0)
    writer.output_legend()
    yield from out.take()
    for interval in ordered:
        writer.output_interval_histogram(
            to_hdrh(interval.hist),
            (interval.start_us - base_us) / 1e6,
            (interval.end_us - base_us) / 1e6,
            MAX_VALUE_UNIT_RATIO,
        )
        yield from out.take()


def interval_of(h: HdrHistogram, layouts: dict[tuple[int, int, int], HdrLayout]) -> HlogInterval:
    """An interval ``hdrh``'s reader read, on the wall clock, in the layout it was encoded with
    (``layouts``: one ``HdrLayout`` per distinct layout, shared by the intervals)."""
    key = (h.lowest_trackable_value, h.highest_trackable_value, h.significant_figures)
    layout = layouts.setdefault(key, HdrLayout(*key))
    return HlogInterval(
        _stamp_us(h.get_start_time_stamp()),
        _stamp_us(h.get_end_time_stamp()),
        from_hdrh(h, layout),
    )


def _stamp_us(msec: Any) -> int:
    """hdrh stamps are float msec since the epoch; windows are integer µs."""
    return round(float(msec) * 1000.0)
