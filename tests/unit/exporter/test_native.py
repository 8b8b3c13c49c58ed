"""HDR → native re-binning: bucket math, counts kept, the schema degraded to fit, and the error."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from core.hdr import HdrLayout, SparseHistogram
from monitor.exporter.config import ExporterConfig
from monitor.exporter.native import (
    MAX_SCHEMA,
    MIN_SCHEMA,
    NativeBuckets,
    bucket_width,
    native_index,
    rebin,
    upper_bound,
)

LAYOUT = HdrLayout()
values_us = st.lists(st.integers(0, 3_600_000_000), min_size=1, max_size=300)
schemas = st.integers(MIN_SCHEMA, MAX_SCHEMA)


def native_quantile(b: NativeBuckets, q: float) -> float:
    """``histogram_quantile`` on native buckets as Prometheus 2.42 reads them: rank q·count,
    the first bucket whose cumulative count reaches it, linear inside that bucket."""
    total = b.zero_count + int(b.count.sum())
    rank = q * total
    if rank <= b.zero_count:
        return 0.0
    cum = b.zero_count
    for i, c in zip(b.index.tolist(), b.count.tolist(), strict=True):
        if cum + c >= rank:
            lo, hi = upper_bound(i - 1, b.schema), upper_bound(i, b.schema)
            return lo + (hi - lo) * (rank - cum) / c
        cum += c
    return upper_bound(int(b.index[-1]), b.schema)


@given(st.lists(st.floats(1e-7, 1e5), min_size=1, max_size=50), schemas)
def test_a_value_lies_in_its_buckets_bounds(values: list[float], schema: int) -> None:
    for v, i in zip(values, native_index(values, schema).tolist(), strict=True):
        assert upper_bound(i - 1, schema) < v * (1 + 1e-12)
        assert v <= upper_bound(i, schema) * (1 + 1e-12)


def test_powers_of_two_are_upper_bounds() -> None:
    for schema in (-4, -1, 0, 3, 8):
        for v in (0.25, 1.0, 2.0, 1024.0):
            i = int(native_index([v], schema)[0])
            assert upper_bound(i, schema) == v or schema < 0  # coarser: a boundary every 2^k
            assert upper_bound(i - 1, schema) < v <= upper_bound(i, schema)


@settings(max_examples=60, deadline=None)
@given(values_us, schemas, st.integers(1, 400))
def test_counts_are_kept_in_order_and_the_limit_holds(
    values: list[int], schema: int, limit: int
) -> None:
    h = SparseHistogram.from_values(LAYOUT, values)
    b = rebin(h, schema, limit)
    assert b.zero_count + int(b.count.sum()) == len(values)
    assert b.zero_count == sum(v == 0 for v in values)
    assert np.all(np.diff(b.index) > 0) and np.all(b.count > 0)
    assert b.schema <= schema
    assert b.index.size <= limit or b.schema == MIN_SCHEMA
    if b.schema < schema:  # only as coarse as needed
        assert rebin(h, b.schema + 1, 10**9).index.size > limit


@settings(max_examples=40, deadline=None)
@given(values_us, st.integers(MIN_SCHEMA + 1, MAX_SCHEMA))
def test_a_coarser_schema_is_the_finer_one_with_bucket_pairs_merged(
    values: list[int], schema: int
) -> None:
    h = SparseHistogram.from_values(LAYOUT, values)
    fine, coarse = rebin(h, schema, 10**9), rebin(h, schema - 1, 10**9)
    merged: dict[int, int] = {}
    for i, c in zip(fine.index.tolist(), fine.count.tolist(), strict=True):
        j = ((i - 1) >> 1) + 1  # Prometheus' reduceResolution target index
        merged[j] = merged.get(j, 0) + c
    assert merged == dict(zip(coarse.index.tolist(), coarse.count.tolist(), strict=True))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 3_600_000_000), min_size=1, max_size=300), schemas)
def test_a_native_quantile_is_within_one_bucket_of_the_hdr_quantile(
    values: list[int], schema: int
) -> None:
    h = SparseHistogram.from_values(LAYOUT, values)
    b = rebin(h, schema, 10**9)
    tolerance = bucket_width(b.schema)
    for q in (0.5, 0.9, 0.99, 0.999):
        hdr = h.value_at_quantile(q) / 1e6
        assert abs(native_quantile(b, q) - hdr) <= tolerance * hdr * (1 + 1e-9), q


def test_rebinning_error_against_exact_quantiles_is_within_the_stated_tolerance() -> None:
    """Measured on lognormal and bimodal latencies (1 ms median, a 100x tail): exact nearest-rank
    vs HDR vs native schema 8. The native reading is within bucket_width(8) = 0.271 % of HDR's,
    and within 0.271 % + HDR's own 0.1 % of the exact quantile."""
    rng = np.random.default_rng(7)
    datasets = {
        "lognormal": rng.lognormal(math.log(1_000), 0.5, 200_000),
        "bimodal": np.concatenate(
            [
                rng.lognormal(math.log(1_000), 0.2, 199_000),
                rng.lognormal(math.log(100_000), 0.3, 1_000),
            ]
        ),
    }
    worst_hdr = worst_exact = 0.0
    for data in datasets.values():
        v = np.maximum(data.astype(np.int64), 1)
        h = SparseHistogram.from_values(LAYOUT, v)
        b = rebin(h, MAX_SCHEMA, 10**9)
        assert b.schema == MAX_SCHEMA
        srt = np.sort(v)
        for q in (0.5, 0.9, 0.99, 0.999, 0.9999):
            exact = srt[math.ceil(q * v.size) - 1] / 1e6
            native = native_quantile(b, q)
            worst_hdr = max(worst_hdr, abs(native / (h.value_at_quantile(q) / 1e6) - 1))
            worst_exact = max(worst_exact, abs(native / exact - 1))
    print(f"re-binning error, schema 8: vs HDR {worst_hdr:.4%}, vs exact {worst_exact:.4%}")
    assert worst_hdr <= bucket_width(8)
    assert worst_exact <= bucket_width(8) + 1e-3
    assert worst_hdr > 0  # re-binning does add an error: the test measures something


def test_the_default_limit_degrades_a_wide_distribution() -> None:
    rng = np.random.default_rng(1)
    h = SparseHistogram.from_values(LAYOUT, rng.lognormal(math.log(5_000), 1.5, 50_000).astype(int))
    default = ExporterConfig()
    b = rebin(h, default.native_schema, default.native_max_buckets)
    assert b.index.size <= default.native_max_buckets < rebin(h, MAX_SCHEMA, 10**9).index.size
    assert b.schema < MAX_SCHEMA


def test_spans_and_deltas_describe_the_buckets() -> None:
    b = NativeBuckets(8, 0, np.array([-3, -2, 5, 6, 7, 20]), np.array([1, 4, 2, 2, 9, 1]))
    spans, deltas = b.spans_and_deltas()
    assert spans == [(-3, 2), (6, 3), (12, 1)]
    assert deltas == [1, 3, -2, 0, 7, -8]


def test_only_zeros_fill_the_zero_bucket_and_no_span() -> None:
    b = rebin(SparseHistogram.from_values(LAYOUT, [0, 0, 0]), MAX_SCHEMA, 160)
    assert (b.zero_count, b.index.size) == (3, 0)
    assert b.spans_and_deltas() == ([], [])
