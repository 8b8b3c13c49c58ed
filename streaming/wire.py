"""The histogram a partial row carries into Spark's state: one byte string, read by the JVM.

One row per (window, series, kind) carries a whole sparse histogram, so Spark's work and state
grow with windows × series × kinds, not with distinct HDR buckets (2.8 partial rows per echo
with one row per bucket, 12 series, 10s/1m/1h, measured). Format ``FORMAT`` (little-endian, the
same as ``jvm/aggregator``'s ``HistogramMerge``, which merges them in the state): a format byte,
int64 lost, int64 max_us, int64 sum_us, then (int32 bucket, int64 count) entries in ascending
bucket order, no bucket twice. Encoding is vectorised (no Python loop per histogram); decoding
runs only on closed windows.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

#: The encoding's version: the first byte of every histogram, and part of the state format.
FORMAT = 1
HEADER = np.dtype([("format", "u1"), ("lost", "<i8"), ("max_us", "<i8"), ("sum_us", "<i8")])
ENTRY = np.dtype([("bucket", "<i4"), ("count", "<i8")])


class WireError(ValueError):
    """A histogram that is not of format ``FORMAT`` (another release's state)."""


def encode(
    lost: npt.ArrayLike,
    max_us: npt.ArrayLike,
    sum_us: npt.ArrayLike,
    offsets: npt.ArrayLike,
    buckets: npt.ArrayLike,
    counts: npt.ArrayLike,
) -> pa.BinaryArray:
    """One histogram per group: group ``g``'s entries are ``[offsets[g], offsets[g+1])``.

    Each group's buckets must be ascending and distinct.
    """
    off = np.asarray(offsets, np.int64)
    groups = len(off) - 1
    lengths = np.diff(off)
    sizes = HEADER.itemsize + ENTRY.itemsize * lengths
    starts = np.zeros(groups + 1, np.int64)
    np.cumsum(sizes, out=starts[1:])
    data = np.empty(int(starts[-1]), np.uint8)
    head = np.zeros(groups, HEADER)
    head["format"] = FORMAT
    head["lost"], head["max_us"], head["sum_us"] = lost, max_us, sum_us
    data[starts[:-1, None] + np.arange(HEADER.itemsize)] = head.view(np.uint8).reshape(
        groups, HEADER.itemsize
    )
    entries = np.empty(int(off[-1] - off[0]), ENTRY)
    entries["bucket"] = np.asarray(buckets)[off[0] : off[-1]]
    entries["count"] = np.asarray(counts)[off[0] : off[-1]]
    within = np.arange(len(entries)) - np.repeat(off[:-1] - off[0], lengths)
    at = np.repeat(starts[:-1] + HEADER.itemsize, lengths) + ENTRY.itemsize * within
    data[at[:, None] + np.arange(ENTRY.itemsize)] = entries.view(np.uint8).reshape(
        len(entries), ENTRY.itemsize
    )
    if starts[-1] >= 2**31:
        raise ValueError("more than 2 GiB of histograms in one batch")
    return pa.Array.from_buffers(
        pa.binary(), groups, [None, pa.py_buffer(starts.astype(np.int32)), pa.py_buffer(data)]
    )


def decode(blob: bytes) -> tuple[int, int, int, np.ndarray, np.ndarray]:
    """``(lost, max_us, sum_us, buckets, counts)`` of one histogram."""
    if (
        len(blob) < HEADER.itemsize
        or blob[0] != FORMAT
        or ((len(blob) - HEADER.itemsize) % ENTRY.itemsize)
    ):
        raise WireError(f"histogram of format {blob[0] if blob else None}, expected {FORMAT}")
    head = np.frombuffer(blob, HEADER, count=1)[0]
    entries = np.frombuffer(blob, ENTRY, offset=HEADER.itemsize)
    return (
        int(head["lost"]),
        int(head["max_us"]),
        int(head["sum_us"]),
        entries["bucket"].astype(np.int64),
        entries["count"].astype(np.int64),
    )
