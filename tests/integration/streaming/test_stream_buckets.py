"""The native Spark bucket expression equals ``HdrLayout.index_of`` for any layout and value."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from core.hdr import HdrLayout
from streaming.histograms import bucket_index

layouts = st.builds(
    lambda lowest_exp, digits, span_exp: HdrLayout(
        2**lowest_exp if lowest_exp >= 0 else 1, 2 ** (span_exp + max(lowest_exp, 0)), digits
    ),
    st.integers(-1, 12),
    st.integers(1, 4),
    st.integers(12, 42),
)
values = st.integers(-5, 2**50) | st.integers(0, 45).flatmap(
    lambda k: st.sampled_from([2**k - 1, 2**k, 2**k + 1])
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(layouts, min_size=1, max_size=4), st.lists(values, min_size=1, max_size=200))
def test_bucket_expression_equals_numpy(
    spark: Any, layout_list: list[HdrLayout], vs: list[int]
) -> None:
    edges = [layout_list[0].highest_us, layout_list[0].highest_us + 1, 0, 1]
    data = vs + edges
    df = spark.createDataFrame([(i, v) for i, v in enumerate(data)], "i bigint, v bigint")
    cols = [bucket_index(F.col("v"), lay).alias(f"b{j}") for j, lay in enumerate(layout_list)]
    rows = sorted(df.select("i", *cols).collect())
    for j, lay in enumerate(layout_list):
        assert [r[f"b{j}"] for r in rows] == lay.index_of(np.array(data)).tolist(), lay
    # above the highest trackable value: the overflow index (counted, never clamped)
    assert rows[len(vs) + 1]["b0"] == layout_list[0].overflow_index
