"""HDR buckets re-binned to a Prometheus native histogram (sparse exponential buckets).

A native bucket of schema ``s`` and index ``i`` holds the values in ``(2^((i-1)/2^s), 2^(i/2^s)]``
seconds: each power of two is cut into ``2^s`` buckets, each ``2^(2^-s)`` times as wide as the one
below (schema 8: 0.271 %). Every HDR bucket's count goes to the native bucket of the value HDR
itself reports for it (its highest equivalent value, capped at the exact max: overflow goes to
the max's bucket). The mapping keeps bucket order, so the rank-th sample's native bucket holds
the value HDR reports for that rank: a quantile Prometheus reads from the native buckets
(``histogram_quantile`` interpolates inside one bucket) is within one native bucket width of
nines' own HDR quantile, a relative error below ``bucket_width(schema)``
(tests/unit/exporter/test_native.py measures it against exact quantiles too).

Values of 0 µs are the zero bucket. A series whose buckets would exceed ``max_buckets`` goes to
a coarser schema (each step halves the buckets per power of two), as Prometheus and
client_golang do with a bucket limit; boundaries of schema ``s - 1`` are boundaries of ``s``, so
re-binning at the coarser schema equals merging bucket pairs (Prometheus' ``reduceResolution``:
bucket ``i`` goes to ``((i - 1) >> 1) + 1``). The limit counts populated buckets, as Prometheus
counts a scraped histogram's (our spans hold no empty bucket), never the zero bucket. Where
Prometheus fails a scrape that still exceeds its limit at schema -4, nothing is dropped here:
from 1 µs to 1 h, schema -4 holds at most 3 buckets, so only a limit below 3 is ever exceeded.
The exporter keeps each series' coarser schema from then on, as client_golang does (tests in
tests/unit/exporter/test_native.py and test_protobuf_exposition.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from core.hdr import SparseHistogram

#: The finest native schema the format allows: buckets 2^(1/256) apart (0.271 % wide).
MAX_SCHEMA: Final = 8
#: Coarsest schema the format allows (buckets 2^16 apart).
MIN_SCHEMA: Final = -4
#: Width of the zero bucket in seconds: client_golang's default, below any nonzero HDR value
#: (1 µs), so only 0 µs lands in it; nonzero, so an empty histogram still reads as native.
ZERO_THRESHOLD_S: Final = 2.0**-128

I64 = npt.NDArray[np.int64]


def bucket_width(schema: int) -> float:
    """Relative width of a bucket of ``schema``: the most a quantile read from it can be off."""
    return float(2.0 ** (2.0**-schema) - 1.0)


@functools.cache
def _bounds(schema: int) -> npt.NDArray[np.float64]:
    """Mantissa bounds in [0.5, 1) cutting one power of two into ``2^schema`` buckets."""
    n = 1 << schema
    return np.array([0.5 * 2.0 ** (j / n) for j in range(n)], dtype=np.float64)


def native_index(values_s: npt.ArrayLike, schema: int) -> I64:
    """The native bucket index of each (positive) value in seconds: upper bounds inclusive."""
    v = np.asarray(values_s, dtype=np.float64)
    frac, exp = np.frexp(v)
    exp = exp.astype(np.int64)
    if schema > 0:
        key = np.searchsorted(_bounds(schema), frac, side="left").astype(np.int64)
        return key + (exp - 1) * (1 << schema)
    key = exp - (frac == 0.5)  # a power of two is the top of the bucket below
    offset = (1 << -schema) - 1
    return (key + offset) >> -schema


def upper_bound(index: int, schema: int) -> float:
    """The inclusive upper bound, in seconds, of native bucket ``index`` of ``schema``."""
    return float(2.0 ** (index * 2.0**-schema))


@dataclass(frozen=True)
class NativeBuckets:
    """A native histogram's positive side: ascending bucket indices and their counts."""

    schema: int
    zero_count: int
    index: I64
    count: I64

    def spans_and_deltas(self) -> tuple[list[tuple[int, int]], list[int]]:
        """The wire form: spans (offset, length) and each bucket's count minus the previous one."""
        spans: list[tuple[int, int]] = []
        prev_end = 0
        for i in self.index.tolist():
            if spans and i == prev_end:
                spans[-1] = (spans[-1][0], spans[-1][1] + 1)
            else:
                spans.append((i - prev_end if spans else i, 1))
            prev_end = i + 1
        counts = self.count.tolist()
        deltas = [c - p for c, p in zip(counts, [0, *counts], strict=False)]
        return spans, deltas


def representatives_us(hist: SparseHistogram) -> I64:
    """The value HDR reports for each of ``hist``'s buckets: its highest equivalent value,
    capped at the exact max (overflow: the max)."""
    layout = hist.layout
    ok = hist.index < layout.overflow_index
    highs = np.where(ok, layout.highest_value_at(np.where(ok, hist.index, 0)), hist.max_us)
    return np.minimum(highs, hist.max_us).astype(np.int64)


def rebin(hist: SparseHistogram, schema: int, max_buckets: int) -> NativeBuckets:
    """``hist``'s buckets at ``schema``, or the finest coarser schema that fits ``max_buckets``."""
    if not MIN_SCHEMA <= schema <= MAX_SCHEMA:
        raise ValueError(f"native schema must be in [{MIN_SCHEMA}, {MAX_SCHEMA}], got {schema}")
    reps = representatives_us(hist)
    zero = reps <= 0
    zero_count = int(hist.count[zero].sum())
    values_s = reps[~zero] / 1e6
    counts = hist.count[~zero]
    while True:
        idx = native_index(values_s, schema)
        uniq, inverse = np.unique(idx, return_inverse=True)
        if uniq.size <= max_buckets or schema == MIN_SCHEMA:
            break
        schema -= 1
    summed = np.zeros(uniq.shape, np.int64)
    np.add.at(summed, inverse, counts)
    return NativeBuckets(schema, zero_count, uniq.astype(np.int64), summed)
