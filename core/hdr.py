"""HDR histogram bucket math in numpy, bit-compatible with ``hdrh.HdrHistogram``.

Histograms here are *sparse*: sorted bucket indices with counts. Merging two histograms is adding
counts at equal indices; a quantile is read only from a (merged) histogram, never averaged.
The Spark column expression in ``streaming.histograms`` computes the same indices natively.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]

#: Quantiles nines reports, up to six nines; the max is reported beside them, exactly.
REPORTED_QUANTILES: Final = (0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999, 0.999999)


def quantile_label(q: float) -> str:
    """The product's one name for a quantile: p99.9 for 0.999, p50 for 0.5."""
    return f"p{round(q * 100, 6):g}"


class LayoutError(ValueError):
    """A layout setting out of range; ``field`` names it, ``reason`` says why, for config errors."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field} {reason}")
        self.field, self.reason = field, reason


@dataclass(frozen=True)
class HdrLayout:
    """Bucket layout of an HDR histogram over integer microseconds."""

    lowest_us: int = 1
    highest_us: int = 3_600_000_000
    digits: int = 3
    unit_magnitude: int = field(init=False)
    sub_bucket_half_count_magnitude: int = field(init=False)
    sub_bucket_count: int = field(init=False)
    sub_bucket_half_count: int = field(init=False)
    sub_bucket_mask: int = field(init=False)
    bucket_count: int = field(init=False)
    counts_len: int = field(init=False)

    def __post_init__(self) -> None:
        if not 1 <= self.digits <= 4:
            raise LayoutError("digits", "must be 1..4 significant digits")
        if self.lowest_us < 1:
            raise LayoutError("lowest_us", "must be at least 1")
        if self.highest_us < 2 * self.lowest_us:
            raise LayoutError("highest_us", "must be at least twice lowest_us")
        unit_magnitude = math.floor(math.log2(self.lowest_us))
        single_unit = 2 * 10**self.digits
        count_magnitude = math.ceil(math.log2(single_unit))
        half_magnitude = max(count_magnitude - 1, 0)
        sub_bucket_count = 1 << (half_magnitude + 1)
        smallest_untrackable = sub_bucket_count << unit_magnitude
        buckets = 1
        while smallest_untrackable <= self.highest_us:
            smallest_untrackable <<= 1
            buckets += 1
        values = {
            "unit_magnitude": unit_magnitude,
            "sub_bucket_half_count_magnitude": half_magnitude,
            "sub_bucket_count": sub_bucket_count,
            "sub_bucket_half_count": sub_bucket_count // 2,
            "sub_bucket_mask": (sub_bucket_count - 1) << unit_magnitude,
            "bucket_count": buckets,
            "counts_len": (buckets + 1) * (sub_bucket_count // 2),
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def to_option(self) -> str:
        """The layout as one string option for Spark (read back by ``from_option``)."""
        return f"{self.lowest_us},{self.highest_us},{self.digits}"

    @classmethod
    def from_option(cls, text: str) -> HdrLayout:
        """The layout back from ``to_option``'s string."""
        lowest_us, highest_us, digits = (int(x) for x in text.split(","))
        return cls(lowest_us, highest_us, digits)

    @property
    def overflow_index(self) -> int:
        """Index that holds values above ``highest_us``: counted, never clamped silently."""
        return self.counts_len

    def index_of(self, values_us: npt.ArrayLike) -> I64:
        """Counts index of each value (``overflow_index`` above the range, 0 for values < 1)."""
        v = np.maximum(np.asarray(values_us, dtype=np.int64), 0)
        masked = v | np.int64(self.sub_bucket_mask)
        pow2ceiling = _bit_length(masked)
        bucket = pow2ceiling - self.unit_magnitude - (self.sub_bucket_half_count_magnitude + 1)
        sub_bucket = v >> (bucket + self.unit_magnitude)
        index = ((bucket + 1) << self.sub_bucket_half_count_magnitude) + (
            sub_bucket - self.sub_bucket_half_count
        )
        return np.where(v > self.highest_us, self.overflow_index, index).astype(np.int64)

    def lowest_value_at(self, index: npt.ArrayLike) -> I64:
        """Lowest value that maps to each counts index."""
        i = np.asarray(index, dtype=np.int64)
        bucket = (i >> self.sub_bucket_half_count_magnitude) - 1
        sub_bucket = (i & (self.sub_bucket_half_count - 1)) + self.sub_bucket_half_count
        under = bucket < 0
        sub_bucket = np.where(under, sub_bucket - self.sub_bucket_half_count, sub_bucket)
        bucket = np.where(under, 0, bucket)
        return (sub_bucket << (bucket + self.unit_magnitude)).astype(np.int64)

    def highest_value_at(self, index: npt.ArrayLike) -> I64:
        """Highest value that maps to each counts index (HdrHistogram's highest equivalent)."""
        i = np.asarray(index, dtype=np.int64)
        bucket = np.maximum((i >> self.sub_bucket_half_count_magnitude) - 1, 0)
        return self.lowest_value_at(i) + (np.int64(1) << (bucket + self.unit_magnitude)) - 1


def _bit_length(v: I64) -> I64:
    """Exact bit length of positive int64 values (64 - count of leading zeros).

    ``frexp``'s exponent is the bit length of any integer a float64 holds exactly (below 2**53):
    one pass instead of six shift-and-compare passes (a read task's hot spot: docs/benchmarks.md,
    figures the code cites); the rare larger values take the passes.
    """
    out = np.frexp(v.astype(np.float64))[1].astype(np.int64)
    big = v >= np.int64(1) << 53
    if big.any():
        out[big] = _bit_length_shifts(v[big])
    return out


def _bit_length_shifts(v: I64) -> I64:
    out = np.zeros(v.shape, dtype=np.int64)
    x = v.copy()
    for shift in (32, 16, 8, 4, 2, 1):
        big = x >= (np.int64(1) << shift)
        out = np.where(big, out + shift, out)
        x = np.where(big, x >> shift, x)
    return out + (x > 0)


def rank_for_quantile(q: float, total: int) -> int:
    """Nearest-rank: the 1-based rank of the q-quantile among ``total`` samples."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    return max(1, min(total, math.ceil(round(q * total, 6))))


def min_samples_for(q: float) -> int:
    """Samples a window needs before quantile q means anything: 1/(1-q)."""
    return math.ceil(round(1.0 / (1.0 - q), 6)) if q < 1.0 else 1


@dataclass(frozen=True)
class SparseHistogram:
    """A mergeable HDR histogram: sorted indices, counts, and the exact max and sum."""

    layout: HdrLayout
    index: I64
    count: I64
    max_us: int = 0
    sum_us: int = 0

    @classmethod
    def empty(cls, layout: HdrLayout) -> SparseHistogram:
        """A histogram with no samples."""
        return cls(layout, np.zeros(0, np.int64), np.zeros(0, np.int64))

    @classmethod
    def from_values(cls, layout: HdrLayout, values_us: npt.ArrayLike) -> SparseHistogram:
        """Record raw values (microseconds)."""
        v = np.asarray(values_us, dtype=np.int64)
        if v.size == 0:
            return cls.empty(layout)
        idx, cnt = np.unique(layout.index_of(v), return_counts=True)
        return cls(layout, idx.astype(np.int64), cnt.astype(np.int64), int(v.max()), int(v.sum()))

    @classmethod
    def from_counts(
        cls,
        layout: HdrLayout,
        index: npt.ArrayLike,
        count: npt.ArrayLike,
        max_us: int,
        sum_us: int = 0,
    ) -> SparseHistogram:
        """Build from (possibly unsorted, repeated) index/count pairs, e.g. Spark output rows."""
        idx = np.asarray(index, dtype=np.int64)
        cnt = np.asarray(count, dtype=np.int64)
        uniq, inverse = np.unique(idx, return_inverse=True)
        summed = np.zeros(uniq.shape, np.int64)
        np.add.at(summed, inverse, cnt)
        keep = summed > 0
        return cls(layout, uniq[keep], summed[keep], int(max_us), int(sum_us))

    @property
    def total(self) -> int:
        """Number of samples."""
        return int(self.count.sum())

    @property
    def overflow(self) -> int:
        """Samples above the layout's highest trackable value."""
        hit = self.index == self.layout.overflow_index
        return int(self.count[hit].sum())

    def merge(self, other: SparseHistogram) -> SparseHistogram:
        """The histogram of both sample sets: counts added bucket by bucket."""
        if other.layout != self.layout:
            raise ValueError("cannot merge histograms with different layouts")
        at = np.searchsorted(self.index, other.index)
        if (
            at.size
            and at[-1] < self.index.size
            and (self.index[at] == other.index).all()
            and self.count.all()
        ):
            # every bucket of other is one of self's already (a cumulative histogram, once it
            # has seen a few windows): add in place of sorting both again (the exporter merges
            # 60 topic windows per batch into histograms of 10,000 buckets and more)
            count = self.count.copy()
            np.add.at(count, at, other.count)
            return SparseHistogram(
                self.layout,
                self.index,
                count,
                max(self.max_us, other.max_us),
                self.sum_us + other.sum_us,
            )
        return SparseHistogram.from_counts(
            self.layout,
            np.concatenate([self.index, other.index]),
            np.concatenate([self.count, other.count]),
            max(self.max_us, other.max_us),
            self.sum_us + other.sum_us,
        )

    def value_at_quantile(self, q: float) -> int:
        """Nearest-rank quantile: the bucket's highest equivalent value, capped at the exact max."""
        return self.values_at_quantiles((q,))[0]

    def values_at_quantiles(self, qs: Sequence[float]) -> list[int]:
        """Nearest-rank quantiles, each the bucket's highest equivalent value capped at the exact
        max (the max itself for q >= 1 and for overflow), with one cumulative sum for all."""
        total = self.total
        if total == 0:
            return [0] * len(qs)
        cum = np.cumsum(self.count)
        out = []
        for q in qs:
            if q >= 1.0:
                out.append(self.max_us)
                continue
            idx = int(self.index[int(np.searchsorted(cum, rank_for_quantile(q, total)))])
            if idx >= self.layout.overflow_index:
                out.append(self.max_us)
            else:
                out.append(min(int(self.layout.highest_value_at(idx)), self.max_us))
        return out

    def counts_at_or_below(self, values_us: Sequence[int]) -> list[int]:
        """Samples whose bucket lies entirely at or below each bound (overflow never does), for
        cumulative buckets: one cumulative sum for all bounds."""
        if self.index.size == 0:
            return [0] * len(values_us)
        ok = self.index < self.layout.overflow_index
        highs = self.layout.highest_value_at(self.index[ok])  # ascending: indices are sorted
        cum = np.concatenate(([0], np.cumsum(self.count[ok])))
        return [int(x) for x in cum[np.searchsorted(highs, values_us, side="right")]]

    def count_at_or_below(self, value_us: int) -> int:
        """Samples whose bucket lies entirely at or below ``value_us`` (for cumulative buckets)."""
        return self.counts_at_or_below((value_us,))[0]


class ManyReads(NamedTuple):
    """``quantiles_of_many``'s reads, one row per histogram."""

    #: histograms × quantiles: ``values_at_quantiles``, -1 where it holds fewer than
    #: ``min_samples_for(q)`` samples
    values: I64
    totals: I64
    max_us: I64
    overflow: I64


#: Histograms read together by ``quantiles_of_many``: their buckets' arrays stay a few MB (one
#: pass over 26 million buckets of 30,000 windows took 2.4 s, most of it in page faults of fresh
#: arrays; 512 at a time 0.2 s).
MANY_AT_ONCE: Final = 512


def quantiles_of_many(hists: Sequence[SparseHistogram], qs: Sequence[float]) -> ManyReads:
    """The quantiles, totals, max and overflow of many histograms of one layout at once.

    One cumulative sum over many instead of one per histogram: the exporter reads the quantiles
    of every window of a batch, three per probe partition, and one by one they took seconds
    (docs/benchmarks.md, figures the code cites; tests/unit/core/test_hdr_vectorised.py holds
    the two equal).
    """
    reads = [
        _quantiles_of(hists[i : i + MANY_AT_ONCE], qs) for i in range(0, len(hists), MANY_AT_ONCE)
    ]
    if len(reads) == 1:
        return reads[0]
    if not reads:
        return _quantiles_of([], qs)
    return ManyReads(*(np.concatenate(column) for column in zip(*reads, strict=True)))


@functools.lru_cache(maxsize=1 << 16)  # windows' sample counts repeat from batch to batch
def _rank(q: float, total: int) -> int:
    return rank_for_quantile(q, total)


def _quantiles_of(hists: Sequence[SparseHistogram], qs: Sequence[float]) -> ManyReads:
    n = len(hists)
    out = np.full((n, len(qs)), -1, dtype=np.int64)
    maxes = np.fromiter((h.max_us for h in hists), dtype=np.int64, count=n)
    sizes = np.fromiter((h.index.size for h in hists), dtype=np.int64, count=n)
    if n == 0 or not sizes.any():
        zeros = np.zeros(n, np.int64)
        return ManyReads(out, zeros, maxes, zeros.copy())
    layout = hists[0].layout
    index = np.concatenate([h.index for h in hists])
    cum = np.cumsum(np.concatenate([h.count for h in hists]))
    ends = np.cumsum(sizes)
    upto = np.concatenate(([0], cum))[ends]  # samples up to each one's end
    before = np.concatenate(([0], upto[:-1]))
    totals = upto - before
    # indices are sorted: overflow, the highest, can only be a histogram's last bucket
    last = np.maximum(ends - 1, 0)
    overflow = np.where(
        (sizes > 0) & (index[last] == layout.overflow_index),
        cum[last] - np.concatenate(([0], cum))[last],
        0,
    )
    distinct, where = np.unique(totals, return_inverse=True)
    for j, q in enumerate(qs):
        has = totals >= min_samples_for(q)
        if q >= 1.0:
            out[has, j] = maxes[has]
            continue
        ranks = np.array([_rank(q, t) for t in distinct.tolist()], dtype=np.int64)
        idx = index[np.searchsorted(cum, before[has] + ranks[where[has]])]
        overflowed = idx >= layout.overflow_index
        highs = layout.highest_value_at(np.where(overflowed, 0, idx))
        out[has, j] = np.where(overflowed, maxes[has], np.minimum(highs, maxes[has]))
    return ManyReads(out, totals, maxes, overflow)
