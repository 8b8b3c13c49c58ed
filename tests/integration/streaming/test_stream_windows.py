"""Spark's column expressions agree with the core definitions the Arrow path and ``Echo`` use:
the window rule (``core.windows``) and each latency kind (``core.echo.LATENCY_SPANS``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from core.echo import LATENCY_SPANS, Echo
from core.windows import WindowSpec, window_end_us
from streaming.histograms import latency_column

T0 = 1_800_000_000_000_000
slow = settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@slow
@given(st.lists(st.integers(0, 2**62), min_size=1, max_size=100), st.integers(1, 7200))
def test_spark_window_end_equals_the_arrow_path(spark: Any, ts: list[int], finest_s: int) -> None:
    spec = WindowSpec((finest_s, finest_s * 6))
    df = spark.createDataFrame(
        [(i, t, us) for i, t in enumerate(ts) for us in spec.resolutions_us.values()],
        "i bigint, t bigint, span bigint",
    )
    rows = sorted(
        df.select("i", "span", window_end_us(F.col("t"), F.col("span")).alias("end")).collect()
    )
    arr = np.array(ts, dtype=np.int64)
    for res, span in spec.resolutions_us.items():
        got = [r["end"] for r in rows if r["span"] == span]
        assert got == spec.window_end_us(arr, res).tolist()


@slow
@given(
    st.lists(
        st.tuples(
            st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6), st.booleans()
        ),
        min_size=1,
        max_size=50,
    )
)
def test_spark_latency_columns_equal_the_echo_reference(
    spark: Any, cases: list[tuple[int, int, int, bool]]
) -> None:
    echoes = [
        Echo("p", "c", "t", 0, 1, i, 1, T0, T0 + sent, T0 + acked, None if lost else T0 + rcvd,
             lost=lost, timeout_us=30_000_000 if lost else None)
        for i, (sent, acked, rcvd, lost) in enumerate(cases)
    ]  # fmt: skip
    df = spark.createDataFrame(
        [(e.seq, e.intended_us, e.sent_us, e.acked_us, e.received_us, e.lost, e.timeout_us)
         for e in echoes],
        "seq bigint, intended_us bigint, sent_us bigint, acked_us bigint, received_us bigint, "
        "lost boolean, timeout_us bigint",
    )  # fmt: skip
    kinds = list(LATENCY_SPANS)
    rows = sorted(df.select("seq", *[latency_column(k).alias(k) for k in kinds]).collect())
    for e, r in zip(echoes, rows, strict=True):
        assert [r[k] for k in kinds] == [e.latency_us(k) for k in kinds], e
