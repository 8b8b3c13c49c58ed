"""The exporter's one-pass reads agree with the scalar reads they replace, on any histogram."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.core.hdr import REPORTED_QUANTILES, HdrLayout, SparseHistogram
from monitor.exporter import DEFAULT_LE

LAYOUT = HdrLayout(1, 60_000_000, 3)  # small highest value: overflow samples occur too


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 120_000_000), max_size=300))
def test_one_pass_reads_equal_the_scalar_reads(values: list[int]) -> None:
    h = SparseHistogram.from_values(LAYOUT, np.array(values, dtype=np.int64))
    qs = [*REPORTED_QUANTILES, 1.0]
    assert h.values_at_quantiles(qs) == [h.value_at_quantile(q) for q in qs]
    bounds = [int(le * 1e6) for le in DEFAULT_LE]
    assert h.counts_at_or_below(bounds) == [h.count_at_or_below(b) for b in bounds]
