"""Rows from Spark's kafka source: nothing gets a null event time, so nothing vanishes."""

from __future__ import annotations

import pyarrow as pa

from core.echo import Echo, encode_record
from streaming.job import builtin_kafka_rows
from streaming.source import SOURCE_SCHEMA

T = 1_800_000_000_000_000


def test_bad_records_take_their_kafka_timestamp_as_event_time() -> None:
    good = encode_record(Echo("p", "c", "t", 0, 1, 0, 1, T, T + 5, None, T + 9))
    batch = pa.record_batch(
        {
            "value": pa.array([good, b"{not json", b'{"v": 9}'], pa.binary()),
            "kafka_us": pa.array([T + 50, T + 60, T + 70], pa.int64()),
        }
    )
    (out,) = list(builtin_kafka_rows([batch]))
    assert out.schema == SOURCE_SCHEMA
    rows = out.to_pylist()
    assert [r["rtype"] for r in rows] == ["echo", "bad", "bad"]
    assert [r["event_us"] for r in rows] == [T, T + 60, T + 70]  # an echo keeps its intended time
    assert [r["n"] for r in rows] == [1, 1, 1]
