"""The one-pass reads (the exporter's, and the scalar reads built on them) agree with reads
computed straight from the raw samples, on any histogram."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from core.hdr import (
    REPORTED_QUANTILES,
    HdrLayout,
    SparseHistogram,
    min_samples_for,
    quantiles_of_many,
    rank_for_quantile,
)
from monitor.exporter import DEFAULT_LE

LAYOUT = HdrLayout(1, 60_000_000, 3)  # small highest value: overflow samples occur too


def raw_quantile(values: list[int], q: float) -> int:
    """The nearest-rank sample's bucket's highest value, capped at the max (the max itself for
    q >= 1 or an overflow sample), from the sorted samples."""
    v = sorted(values)
    if not v:
        return 0
    if q >= 1.0:
        return v[-1]
    x = v[rank_for_quantile(q, len(v)) - 1]
    if x > LAYOUT.highest_us:
        return v[-1]
    return min(int(LAYOUT.highest_value_at(LAYOUT.index_of(x))), v[-1])


def raw_count_at_or_below(values: list[int], bound: int) -> int:
    """Samples in range whose bucket's highest value is at or below ``bound``."""
    return sum(
        1
        for x in values
        if x <= LAYOUT.highest_us and int(LAYOUT.highest_value_at(LAYOUT.index_of(x))) <= bound
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 120_000_000), max_size=300))
def test_one_pass_reads_equal_the_scalar_reads(values: list[int]) -> None:
    h = SparseHistogram.from_values(LAYOUT, np.array(values, dtype=np.int64))
    qs = [*REPORTED_QUANTILES, 1.0]
    assert h.values_at_quantiles(qs) == [h.value_at_quantile(q) for q in qs]
    assert h.values_at_quantiles(qs) == [raw_quantile(values, q) for q in qs]
    bounds = [int(le * 1e6) for le in DEFAULT_LE]
    assert h.counts_at_or_below(bounds) == [h.count_at_or_below(b) for b in bounds]
    assert h.counts_at_or_below(bounds) == [raw_count_at_or_below(values, b) for b in bounds]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(1, 120_000_000), max_size=60), max_size=12))
def test_quantiles_of_many_equal_each_histograms_own_read(samples: list[list[int]]) -> None:
    hists = [SparseHistogram.from_values(LAYOUT, np.array(v, dtype=np.int64)) for v in samples]
    qs = [*REPORTED_QUANTILES, 1.0]
    reads = quantiles_of_many(hists, qs)
    assert reads.values.shape == (len(hists), len(qs))
    rows = zip(
        hists, reads.values.tolist(), reads.totals, reads.max_us, reads.overflow, strict=True
    )
    for h, row, total, max_us, overflow in rows:
        assert (total, max_us, overflow) == (h.total, h.max_us, h.overflow)
        want = [
            v if h.total >= min_samples_for(q) else -1
            for q, v in zip(qs, h.values_at_quantiles(qs), strict=True)
        ]
        assert row == want
