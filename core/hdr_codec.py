"""HdrHistogram's compressed encoding, through ``hdrh``: our sparse histograms in and out.

The archive stores this encoding beside its bucket columns and ``.hlog`` lines carry it, so any
HdrHistogram tool (Java, Go, Python) reads what nines wrote. Pure: no file or network I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from core.hdr import HdrLayout, SparseHistogram

if TYPE_CHECKING:
    from hdrh.histogram import HdrHistogram


def to_hdrh(hist: SparseHistogram) -> HdrHistogram:
    """The same histogram as an ``hdrh.HdrHistogram`` (overflow samples are left out).

    Our bucket index is ``hdrh``'s counts index for the same layout, so the counts are written
    into its array with one numpy add, and the totals set as ``record_value`` would leave them:
    no Python call per bucket (docs/benchmarks.md, figures the code cites). ``hdrh`` encodes
    the counts (ZigZag LEB128) in C already.
    """
    from hdrh.histogram import HdrHistogram

    layout = hist.layout
    h = HdrHistogram(layout.lowest_us, layout.highest_us, layout.digits)
    in_range = hist.index < layout.overflow_index
    index, count = hist.index[in_range], hist.count[in_range]
    if index.size == 0:
        return h
    counts = np.ctypeslib.as_array(h.counts)
    counts[index] += count.astype(counts.dtype)
    h.total_count += int(count.sum())
    h.min_value = min(h.min_value, int(layout.lowest_value_at(int(index[0]))))
    h.max_value = max(h.max_value, int(layout.lowest_value_at(int(index[-1]))))
    return h


def from_hdrh(h: HdrHistogram, layout: HdrLayout) -> SparseHistogram:
    """A sparse histogram of an ``hdrh`` one with the same layout.

    The encoding carries bucket counts only: the max is the top bucket's highest equivalent value
    (as ``hdrh`` reports it) and the sum is estimated from bucket midpoints.
    """
    if (h.lowest_trackable_value, h.highest_trackable_value, h.significant_figures) != (
        layout.lowest_us,
        layout.highest_us,
        layout.digits,
    ):
        raise ValueError(
            f"hdrh histogram ({h.lowest_trackable_value}, {h.highest_trackable_value}, "
            f"{h.significant_figures}) does not have the layout {layout}"
        )
    counts = np.ctypeslib.as_array(h.counts)[: layout.counts_len].astype(np.int64)
    index = np.flatnonzero(counts).astype(np.int64)
    count = counts[index]
    if index.size == 0:
        return SparseHistogram.empty(layout)
    mid = (layout.lowest_value_at(index) + layout.highest_value_at(index)) // 2
    max_us = int(layout.highest_value_at(int(index[-1])))
    return SparseHistogram(layout, index, count, max_us, int((mid * count).sum()))


def encode(hist: SparseHistogram) -> bytes:
    """HdrHistogram's standard compressed encoding (base64), as .hlog lines carry it."""
    encoded: bytes = to_hdrh(hist).encode()
    return encoded


def decode(encoded: bytes | str, layout: HdrLayout) -> SparseHistogram:
    """Read HdrHistogram's compressed encoding (base64) into a histogram of ``layout``."""
    from hdrh.histogram import HdrHistogram

    return from_hdrh(HdrHistogram.decode(encoded), layout)
