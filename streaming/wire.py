"""The histogram a partial row carries into Spark's state: one byte string, read by the JVM.

One row per (window, series, kind) carries a whole sparse histogram, so Spark's work and state
grow with windows × series × kinds, not with distinct HDR buckets (one row per bucket made
several partial rows per echo: docs/benchmarks.md, figures the code cites). Encoding is
vectorised (no Python loop per histogram); decoding runs only on closed windows.

The state histogram encoding, format 1 (``FORMAT``): the one specification of it.
``encode``/``decode`` here and ``jvm/aggregator``'s ``HistogramMerge`` (which merges them in
Spark's state) follow it; tests/integration/streaming/test_histogram_merge_jvm.py feeds
``encode``'s bytes to the Java merge and reads its bytes back with ``decode``.

==========  ======  =====================================================================
offset      type    field
==========  ======  =====================================================================
0           uint8   format: 1 (any other is another release's state: refused, never read)
1           int64   lost: messages lost in the window
9           int64   max_us: the exact max (the merge keeps the larger)
17          int64   sum_us: the sum of the values (the merge adds)
25 + 12 i   int32   bucket of entry ``i``: an HDR bucket index (``core.hdr.HdrLayout``)
29 + 12 i   int64   count of entry ``i``
==========  ======  =====================================================================

All little-endian, entries in ascending bucket order, no bucket twice, the length exactly
``25 + 12 n``. A merge adds lost, sum and the counts of equal buckets and keeps the larger max,
so the same histograms merge to the same bytes in any order (a replayed batch builds the same
state). An empty histogram is the 25-byte header with zeros. A change of any of this is a new
``FORMAT`` here and in ``HistogramMerge``, and a new ``streaming.state_format.STATE_FORMAT``.
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
