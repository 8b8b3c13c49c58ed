"""HDR bucket math: bit-compatible with hdrh, and merging is exactly recording everything once."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from hypothesis import given, settings
from hypothesis import strategies as st

from core.hdr import HdrLayout, SparseHistogram, min_samples_for, rank_for_quantile
from core.hdr_codec import encode

HIGHEST = 3_600_000_000
values_st = st.lists(st.integers(min_value=0, max_value=HIGHEST), min_size=1, max_size=300)


@pytest.mark.parametrize("digits", [1, 2, 3, 4])
def test_layout_and_indices_match_hdrh(digits: int) -> None:
    layout = HdrLayout(digits=digits)
    ref = HdrHistogram(1, HIGHEST, digits)
    assert layout.counts_len == ref.counts_len
    rng = np.random.default_rng(digits)
    edges = [v for k in range(33) for v in (2**k - 1, 2**k, 2**k + 1)]
    values = np.concatenate([rng.integers(1, HIGHEST, 5000), np.array(edges)])
    values = values[(values >= 1) & (values <= HIGHEST)]
    idx = layout.index_of(values)
    assert list(idx) == [ref._counts_index_for(int(v)) for v in values]
    assert list(layout.highest_value_at(idx)) == [
        ref.get_highest_equivalent_value(int(v)) for v in values
    ]
    assert list(layout.lowest_value_at(idx)) == [
        ref.get_lowest_equivalent_value(int(v)) for v in values
    ]


def test_overflow_is_counted_not_clamped() -> None:
    layout = HdrLayout(highest_us=1_000_000)
    h = SparseHistogram.from_values(layout, [10, 20, 5_000_000])
    assert h.overflow == 1
    assert h.total == 3
    assert h.max_us == 5_000_000
    assert h.value_at_quantile(0.99) == 5_000_000


@settings(max_examples=60, deadline=None)
@given(values_st, values_st, values_st)
def test_merge_equals_recording_everything(a: list[int], b: list[int], c: list[int]) -> None:
    layout = HdrLayout()
    ha, hb, hc = (SparseHistogram.from_values(layout, x) for x in (a, b, c))
    whole = SparseHistogram.from_values(layout, a + b + c)
    merged = ha.merge(hb).merge(hc)
    assert np.array_equal(merged.index, whole.index)
    assert np.array_equal(merged.count, whole.count)
    assert merged.max_us == whole.max_us and merged.sum_us == whole.sum_us
    # associative and commutative
    other = hc.merge(ha.merge(hb))
    assert np.array_equal(other.count, merged.count) and np.array_equal(other.index, merged.index)


@settings(max_examples=60, deadline=None)
@given(values_st, st.data())
def test_merging_buckets_it_has_already_equals_recording_everything(
    a: list[int], data: st.DataObject
) -> None:
    """A cumulative histogram mostly gains samples in buckets it holds already (a fast path)."""
    layout = HdrLayout()
    b = data.draw(st.lists(st.sampled_from(a), max_size=40)) if a else []
    ha, hb = SparseHistogram.from_values(layout, a), SparseHistogram.from_values(layout, b)
    whole = SparseHistogram.from_values(layout, a + b)
    for merged in (ha.merge(hb), hb.merge(ha)):
        assert np.array_equal(merged.index, whole.index)
        assert np.array_equal(merged.count, whole.count)
        assert merged.max_us == whole.max_us and merged.sum_us == whole.sum_us


@settings(max_examples=60, deadline=None)
@given(values_st, st.sampled_from([0.5, 0.9, 0.99, 0.999, 0.9999]))
def test_quantile_within_hdr_precision_of_exact(values: list[int], q: float) -> None:
    layout = HdrLayout(digits=3)
    h = SparseHistogram.from_values(layout, values)
    exact = sorted(values)[rank_for_quantile(q, len(values)) - 1]
    got = h.value_at_quantile(q)
    assert got >= exact
    assert got <= max(exact * (1 + 2 * 10**-3), exact + 1)
    assert h.value_at_quantile(1.0) == max(values)


def test_quantile_agrees_with_hdrh_on_bucket() -> None:
    rng = np.random.default_rng(7)
    values = rng.lognormal(8, 1.5, 20_000).astype(np.int64) + 1
    layout = HdrLayout()
    ref = HdrHistogram(1, HIGHEST, 3)
    for v in values:
        ref.record_value(int(v))
    h = SparseHistogram.from_values(layout, values)
    for q in (0.5, 0.9, 0.99, 0.999):
        # hdrh rounds the rank half-up, we use nearest rank; both land in the same bucket family
        assert math.isclose(
            h.value_at_quantile(q), ref.get_value_at_percentile(q * 100), rel_tol=2e-3
        )


def test_min_samples_gate() -> None:
    assert min_samples_for(0.99) == 100
    assert min_samples_for(0.999) == 1000
    assert min_samples_for(0.999999) == 1_000_000
    assert rank_for_quantile(0.999, 1000) == 999


def test_encode_roundtrip_through_hdrh() -> None:
    layout = HdrLayout()
    h = SparseHistogram.from_values(layout, [1, 5, 100, 100, 123_456, 3_000_000])
    decoded = HdrHistogram.decode(encode(h))
    assert decoded.get_total_count() == h.total
    assert decoded.get_max_value() == layout.highest_value_at(layout.index_of([3_000_000]))[0]
